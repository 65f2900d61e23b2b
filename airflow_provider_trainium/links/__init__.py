"""Extra links on Trainium tasks: where to see the remote job and its logs."""
