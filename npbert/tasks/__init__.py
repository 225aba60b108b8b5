"""Fine-tuning tasks: data readers, features, metrics and the task modules `npbert finetune` runs."""
