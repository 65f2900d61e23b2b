"""TorchTitan's own trainer on the native stack: a job config (TOML) from the run's params, TorchTitan's
``Trainer`` run with it, our stream/metrics around it and its DCP checkpoint out as a Hugging Face directory."""
