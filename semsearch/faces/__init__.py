"""The faces, derived and thin: the CLI, the HTTP server and page, the MCP server."""
