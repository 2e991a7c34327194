"""MCP: tools and prompts from Model Context Protocol servers, through the official ``mcp`` SDK.

Declare a server as a resource (``MCPServer(command=...)`` for stdio, ``MCPServer(url=...)``
for streamable HTTP; in plans, provider ``flink_agents.integrations.mcp:MCPServer`` with type
``mcp_server``); its tools become tools and its prompts become prompts. See ``docs/mcp.md``.
"""

from flink_agents.integrations.mcp._server import (
    MCPPrompt,
    MCPServer,
    MCPServerError,
    MCPTool,
    MCPToolError,
)

__all__ = ["MCPPrompt", "MCPServer", "MCPServerError", "MCPTool", "MCPToolError"]
