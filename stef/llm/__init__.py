"""The LLM judge (STEF paper §2.D with a language model): prompts, the litellm client, the verdict
cache and budget, and the model path of the pipeline (:mod:`stef.llm.evaluate`).
"""
