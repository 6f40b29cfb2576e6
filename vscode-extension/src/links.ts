// Where a frame's source is, in the text of a backtrace or of `cluster
// hang`: "name (/abs/path/file.py:123)".  Plain functions, tested alone.

export interface FrameLink {
	start: number; // offsets in the text of "/abs/path/file.py:123"
	end: number;
	path: string;
	line: number;
}

// An absolute path (no parenthesis or line break in it), a colon, a line.
const FRAME = /\((\/[^()\n]*?):(\d+)\)/g;

export function frameLinks(text: string, max = 10000): FrameLink[] {
	const out: FrameLink[] = [];
	for (const m of text.matchAll(FRAME)) {
		if (out.length >= max) break;
		const start = (m.index ?? 0) + 1;
		out.push({ start, end: start + m[1].length + 1 + m[2].length, path: m[1], line: Number(m[2]) });
	}
	return out;
}
