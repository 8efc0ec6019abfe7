"""The VLM advisor's training side: fine-tuning on expert chat samples and open-loop scoring.

Serving stays in ``vlm_server`` (its Hugging Face backend loads what ``finetune`` exports);
the prompt and chat text come from there too, so training and serving cannot drift apart.
Needs the ``hf`` extra (transformers, peft).
"""
