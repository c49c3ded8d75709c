/* eslint-disable @typescript-eslint/no-require-imports -- loading on first use is this module's purpose */
/**
 * The MCP SDK's runtime parts, loaded when first used. The SDK (client and server transports,
 * its zod schemas, ajv and hono underneath) costs about 5 MB of heap and 15 MB of RSS, and only
 * the tool gateway (`/v1/mcp/...`) and MCP server registration use it: an API process that
 * serves neither never loads it. Types come from `import type` as usual; values from here.
 *
 * `require` rather than `import()`: the SDK's CommonJS build, as the static imports loaded
 * before, under tsx, Jest and the esbuild build alike; node's module cache keeps each one.
 */
export const mcpTypes = () => require('@modelcontextprotocol/sdk/types.js') as typeof import('@modelcontextprotocol/sdk/types.js');
export const mcpClient = () => require('@modelcontextprotocol/sdk/client/index.js') as typeof import('@modelcontextprotocol/sdk/client/index.js');
export const mcpSseClientTransport = () => require('@modelcontextprotocol/sdk/client/sse.js') as typeof import('@modelcontextprotocol/sdk/client/sse.js');
export const mcpStreamableHttpClientTransport = () => require('@modelcontextprotocol/sdk/client/streamableHttp.js') as typeof import('@modelcontextprotocol/sdk/client/streamableHttp.js');
export const mcpServer = () => require('@modelcontextprotocol/sdk/server/index.js') as typeof import('@modelcontextprotocol/sdk/server/index.js');
export const mcpStreamableHttpServerTransport = () => require('@modelcontextprotocol/sdk/server/streamableHttp.js') as typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js');
export const mcpAjvValidator = () => require('@modelcontextprotocol/sdk/validation/ajv') as typeof import('@modelcontextprotocol/sdk/validation/ajv');
