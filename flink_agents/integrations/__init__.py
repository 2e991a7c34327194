"""Integrations: OpenAI-compatible chat and embedding models, local embeddings, vector stores,
MCP servers."""
