'use strict';
// An MCP client (@modelcontextprotocol/sdk) that spawns `probing mcp`.

const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { PROBING } = require('../../lib/procs');

// An MCP client connected to a `probing mcp` it spawned.
async function mcpClient(args = [], env = {}) {
	const transport = new StdioClientTransport({
		command: PROBING, args: ['mcp', ...args],
		env: { ...process.env, ...env }, stderr: 'pipe',
	});
	const client = new Client({ name: 'probing-tests', version: '0.0.0' });
	await client.connect(transport);
	return client;
}

// A tool's text (its one content item), and whether it failed.
async function call(client, name, args = {}, timeout = 120000) {
	const r = await client.callTool({ name, arguments: args }, undefined, { timeout });
	if (r.content.length !== 1 || r.content[0].type !== 'text') {
		throw new Error(`${name}: not one text item: ${JSON.stringify(r)}`);
	}
	return { text: r.content[0].text, isError: !!r.isError };
}

module.exports = { mcpClient, call };
