// The HTML of a query result (columns, rows) for the SQL view.  Pure.

export function escapeHtml(s: string): string {
	return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c] as string));
}

function cell(v: unknown): string {
	if (v === null || v === undefined) return '<td class="null">NULL</td>';
	if (typeof v === 'number') return `<td class="num">${v}</td>`;
	return `<td>${escapeHtml(typeof v === 'string' ? v : JSON.stringify(v))}</td>`;
}

// "13.7 ms", "0.21 ms", "1,204 ms": three significant digits at most.
export function formatMs(ms: number): string {
	if (!Number.isFinite(ms)) return '? ms';
	if (ms >= 100) return `${Math.round(ms).toLocaleString('en-US')} ms`;
	return `${Number(ms.toPrecision(3))} ms`;
}

export interface QueryResult {
	columns: { name: string; type?: string }[];
	rows: unknown[][];
	truncated?: boolean;
	elapsedMs?: number;
}

export function renderTable(sql: string, r: QueryResult): string {
	const head = r.columns.map((c) => `<th title="${escapeHtml(c.type || '')}">${escapeHtml(c.name)}</th>`).join('');
	const body = r.rows.map((row) => `<tr>${row.map(cell).join('')}</tr>`).join('\n');
	const note = `${r.rows.length} row${r.rows.length === 1 ? '' : 's'}${r.truncated ? ' (truncated)' : ''}` +
		(r.elapsedMs !== undefined ? `, ${formatMs(r.elapsedMs)}` : '');
	return `<!DOCTYPE html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline';">
<style>
body { font-family: var(--vscode-editor-font-family); font-size: var(--vscode-editor-font-size); }
table { border-collapse: collapse; } th, td { border: 1px solid var(--vscode-panel-border); padding: 2px 6px; }
th { text-align: left; position: sticky; top: 0; background: var(--vscode-editor-background); }
td.num { text-align: right; } td.null { opacity: 0.5; } pre { opacity: 0.8; }
</style></head><body>
<pre>${escapeHtml(sql)}</pre><p>${note}</p>
<table><thead><tr>${head}</tr></thead><tbody>
${body}
</tbody></table></body></html>`;
}
