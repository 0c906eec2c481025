"""Tests of the LLM judge (stef.llm), one module per module of stef/llm."""
