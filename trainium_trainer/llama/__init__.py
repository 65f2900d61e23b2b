"""Llama-architecture causal LM: data prep, pretraining, fine-tuning and evaluation on Trainium or the CPU."""
