"""Extra links from a task to the console pages of its job."""
