"""Hugging Face transformers' Trainer with trainprof's callback, on a tiny BERT built from a
config (no download): steps, data wait, forward / backward parts and the training arguments.

    python examples/hf_trainer_callback.py [RUN_DIR]    # then: trainprof report RUN_DIR
"""

import sys

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from trainprof.integrations.transformers import TrainprofCallback


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"input_ids": torch.randint(0, 100, (16,), generator=g), "labels": i % 2}


def main(run_dir: str) -> None:
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=2)
    args = TrainingArguments(output_dir=run_dir + "-out", max_steps=5,
                             per_device_train_batch_size=4, gradient_accumulation_steps=2,
                             report_to=[], save_strategy="no", logging_steps=2, use_cpu=True,
                             dataloader_num_workers=0)
    Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Tokens(),
            callbacks=[TrainprofCallback(out=run_dir)]).train()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "trainprof-runs/hf-example")
