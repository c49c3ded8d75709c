/** Request-log `endpoint` of a tool call (the tool gateway logs its calls beside chat requests). */
export const MCP_CALL_ENDPOINT = 'mcp.tools/call';
