"""A plain Hugging Face ``Trainer`` script, unchanged: default ``output_dir`` (``./trainer_output``), its checkpoints
there, then ``save_model``. A tiny randomly initialised GPT-2 on synthetic tokens: nothing is downloaded."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    def __init__(self, count: int, length: int, vocab: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (count, length), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def main() -> None:
    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(
        output_dir="trainer_output",
        max_steps=4,
        per_device_train_batch_size=4,
        save_steps=2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        seed=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(32, 16, 64))
    trainer.train()
    trainer.save_model("trainer_output/final")


if __name__ == "__main__":
    main()
