/*
 * flamegraph_svg: an interactive flamegraph, drawn here (no external
 * tool).  Root at the bottom, callees above, width proportional to
 * samples, children in label order (flamegraph.pl's layout).  Each frame
 * is a <g> carrying its position in samples (data-x, data-w) and depth
 * (data-d); the embedded script zooms by recomputing rectangles from
 * those, so the file works offline, in a browser or a VS Code webview.
 */
#include "flamegraph_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W FLAMEGRAPH_SVG_WIDTH
#define PAD 10	     /* left and right */
#define FRAME_H 16   /* one stack level */
#define TOP 36	     /* title and buttons */
#define BOTTOM 30    /* details line */
#define MIN_W 0.1    /* frames narrower than this (pixels) are left out */
#define CHAR_W 7.0   /* average width of a 12px monospace character */

/* The script: zoom on click, search, reset.  No "]]>" inside. */
static const char script[] =
	"var W=1200,PAD=10,CH=7.0,total=0,frames=[],details,unzoomBtn,"
	"matchedTxt,searchBtn,query=null,typing=null,ready=false;\n"
	"function attr(g,n){return parseFloat(g.getAttribute(n));}\n"
	"function init(){if(ready)return;ready=true;var svg=document."
	"getElementById('fg-root')||document.documentElement;total=attr(svg,"
	"'data-total');details=document.getElementById('details');unzoomBtn"
	"=document.getElementById('unzoom');matchedTxt=document."
	"getElementById('matched');searchBtn=document.getElementById("
	"'search');var gs=document.getElementById('frames')."
	"getElementsByTagName('g');for(var i=0;i<gs.length;i++){var g=gs[i];"
	"frames.push(g);g.addEventListener('click',function(){zoom(this);});"
	"g.addEventListener('mouseover',function(){details.textContent=this"
	".getElementsByTagName('title')[0].textContent;});g."
	"addEventListener('mouseout',function(){details.textContent=' ';});"
	"}unzoomBtn.addEventListener('click',unzoom);searchBtn."
	"addEventListener('click',function(){if(query)clearSearch();else "
	"askSearch();});window.addEventListener('keydown',key);var m=/[?&]s="
	"([^&]*)/.exec(location.search||'');if(m)search(decodeURIComponent("
	"m[1]));}\n"
	"function key(e){if(typing!==null){e.preventDefault();if(e.key==="
	"'Enter'){var q=typing;typing=null;if(q)search(q);else clearSearch()"
	";return;}if(e.key==='Escape'){typing=null;searchBtn.textContent="
	"query?'Reset search':'Search';return;}if(e.key==='Backspace')typing"
	"=typing.slice(0,-1);else if(e.key.length===1)typing+=e.key;"
	"searchBtn.textContent='Search: '+typing+'_';return;}if((e.ctrlKey||"
	"e.metaKey)&&(e.key==='f'||e.key==='F')){e.preventDefault();"
	"askSearch();}else if(e.key==='Escape'){unzoom();clearSearch();}}\n"
	"function label(g,w){var t=g.getElementsByTagName('text')[0],s=g."
	"getAttribute('data-n'),n=Math.floor((w-6)/CH);t.textContent=n<3?'':"
	"(s.length<=n?s:s.substring(0,n-2)+'..');}\n"
	"function place(g,x,w){var r=g.getElementsByTagName('rect')[0];r."
	"setAttribute('x',x.toFixed(2));r.setAttribute('width',Math.max(w,0)"
	".toFixed(2));g.getElementsByTagName('text')[0].setAttribute('x',(x+"
	"3).toFixed(2));label(g,w);}\n"
	"function show(x0,w0,d0){var s=(W-2*PAD)/w0;for(var i=0;i<frames."
	"length;i++){var g=frames[i],x=attr(g,'data-x'),w=attr(g,'data-w'),"
	"d=attr(g,'data-d');if(x+w<=x0||x>=x0+w0||w*s<0.1){g.style.display="
	"'none';continue;}g.style.display='';if(d<d0){g.setAttribute("
	"'class','f parent');place(g,PAD,W-2*PAD);}else{g.setAttribute("
	"'class','f');place(g,PAD+(x-x0)*s,w*s);}}}\n"
	"function zoom(g){unzoomBtn.setAttribute('class','btn');show(attr(g,"
	"'data-x'),attr(g,'data-w'),attr(g,'data-d'));}\n"
	"function unzoom(){unzoomBtn.setAttribute('class','btn hide');show("
	"0,total,0);}\n"
	"function askSearch(){typing=query||'';searchBtn.textContent="
	"'Search: '+typing+'_';}\n"
	"function clearSearch(){query=null;for(var i=0;i<frames.length;i++)"
	"{var r=frames[i].getElementsByTagName('rect')[0];r.setAttribute("
	"'fill',r.getAttribute('data-c'));}matchedTxt.textContent=' ';"
	"searchBtn.textContent='Search';}\n"
	"function search(q){var re;try{re=new RegExp(q);}catch(e){matchedTxt"
	".textContent='Bad regular expression';return;}clearSearch();query="
	"q;var spans=[];for(var i=0;i<frames.length;i++){var g=frames[i];"
	"if(!re.test(g.getAttribute('data-n')))continue;g."
	"getElementsByTagName('rect')[0].setAttribute('fill','rgb(230,0,"
	"230)');spans.push([attr(g,'data-x'),attr(g,'data-w')]);}spans.sort("
	"function(a,b){return a[0]-b[0];});var sum=0,end=-1;for(var i=0;i<"
	"spans.length;i++){var a=spans[i][0],b=a+spans[i][1];if(a>=end){sum"
	"+=b-a;end=b;}else if(b>end){sum+=b-end;end=b;}}matchedTxt."
	"textContent='Matched: '+(total?100*sum/total:0).toFixed(1)+'%';"
	"searchBtn.textContent='Reset search';}\n"
	"if(document.readyState!=='loading')setTimeout(init,0);else document"
	".addEventListener('DOMContentLoaded',init);\n";

static const char style[] =
	"text{font-family:monospace;font-size:12px;fill:#000}"
	".f{cursor:pointer}.f:hover rect{stroke:#000;stroke-width:0.5}"
	".parent{opacity:0.5}.btn{cursor:pointer;fill:#2050a0}"
	".hide{display:none}#title{font-size:16px}";

static uint32_t hash32(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* flamegraph.pl's palettes, from the label so a function keeps its
 * colour across files: warm for Python, aqua for native code. */
static void colour(const struct fg_name *n, char out[48])
{
	uint32_t h = hash32(n->label);
	double v1 = (h & 0xff) / 255.0, v2 = ((h >> 8) & 0xff) / 255.0,
	       v3 = ((h >> 16) & 0xff) / 255.0;

	switch (n->kind) {
	case FG_NATIVE:
		snprintf(out, 48, "rgb(%d,%d,%d)", 50 + (int)(60 * v1),
			 165 + (int)(55 * v2), 165 + (int)(55 * v3));
		break;
	case FG_STATE:
		if (strstr(n->label, "GIL"))
			snprintf(out, 48, "rgb(180,140,230)");
		else
			snprintf(out, 48, "rgb(170,170,170)");
		break;
	case FG_THREAD:
		snprintf(out, 48, "rgb(200,210,230)");
		break;
	case FG_TASK:
		snprintf(out, 48, "rgb(190,225,200)");
		break;
	case FG_UNKNOWN:
		snprintf(out, 48, "rgb(220,220,220)");
		break;
	default:
		snprintf(out, 48, "rgb(%d,%d,%d)", 205 + (int)(50 * v3),
			 (int)(230 * v1), (int)(55 * v2));
	}
}

/* The text shown in a frame w pixels wide. */
static void fit_label(struct outbuf *b, const char *s, double w)
{
	int n = (int)((w - 6) / CHAR_W);
	size_t len = strlen(s);
	char cut[1024];

	if (n < 3)
		return;
	if (len <= (size_t)n) {
		outbuf_xml_str(b, s);
		return;
	}
	if ((size_t)n > sizeof(cut) - 3)
		n = (int)sizeof(cut) - 3;
	/* Cut on a UTF-8 character boundary. */
	len = (size_t)n - 2;
	while (len && ((unsigned char)s[len] & 0xC0) == 0x80)
		len--;
	memcpy(cut, s, len);
	memcpy(cut + len, "..", 3);
	outbuf_xml_str(b, cut);
}

static void frame(struct outbuf *b, const struct flamegraph *fg,
		  const struct fg_node *nd, double x, int height)
{
	const struct fg_name *n = &fg->names[nd->name];
	double total = (double)fg->nodes[0].total;
	double scale = (W - 2 * PAD) / total;
	double px = PAD + x * scale, pw = (double)nd->total * scale;
	int y = height - BOTTOM - (int)nd->depth * FRAME_H;
	char fill[48];

	colour(n, fill);
	outbuf_puts(b, "<g class=\"f\" data-n=\"");
	outbuf_xml_str(b, n->label);
	outbuf_printf(b, "\" data-x=\"%.0f\" data-w=\"%llu\" data-d=\"%u\"><title>",
		  x, (unsigned long long)nd->total, nd->depth);
	outbuf_xml_str(b, n->label);
	if (fg->o->cpu)
		outbuf_printf(b, " (%.3f ms of CPU, %.2f%%)</title>",
			  (double)nd->total / 1e3,
			  100.0 * (double)nd->total / total);
	else
		outbuf_printf(b, " (%llu sample%s, %.2f%%)</title>",
			  (unsigned long long)nd->total,
			  nd->total == 1 ? "" : "s",
			  100.0 * (double)nd->total / total);
	outbuf_printf(b,
		  "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
		  "fill=\"%s\" data-c=\"%s\" rx=\"2\"/><text x=\"%.2f\" "
		  "y=\"%d\">",
		  px, y, pw, FRAME_H - 1, fill, fill, px + 3, y + 11);
	fit_label(b, n->label, pw);
	outbuf_puts(b, "</text></g>\n");
}

int fg_render_svg(struct flamegraph *fg, struct outbuf *b)
{
	const struct fg_node *root = &fg->nodes[0];
	double scale, *xs;
	uint32_t *stack, v, maxd = 0;
	size_t depth = 0;
	int height;

	for (size_t i = 1; i < fg->nnodes; i++)
		if (fg->nodes[i].depth > maxd)
			maxd = fg->nodes[i].depth;
	height = TOP + BOTTOM + (int)(maxd + 1) * FRAME_H;
	outbuf_printf(b,
		  "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		  "<svg version=\"1.1\" width=\"%d\" height=\"%d\" "
		  "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\" "
		  "id=\"fg-root\" data-total=\"%llu\" onload=\"init()\">\n",
		  W, height, W, height, (unsigned long long)root->total);
	outbuf_printf(b, "<style>%s</style>\n<script type=\"text/ecmascript\">"
		     "<![CDATA[\n%s]]></script>\n",
		  style, script);
	outbuf_printf(b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
		     "fill=\"#f8f8f4\"/>\n<text id=\"title\" x=\"%d\" "
		     "y=\"24\" text-anchor=\"middle\">",
		  W, height, W / 2);
	outbuf_xml_str(b, fg->o->title ? fg->o->title : "Flame Graph");
	outbuf_printf(b, "</text>\n<text id=\"unzoom\" class=\"btn hide\" x=\"%d\" "
		     "y=\"24\">Reset zoom</text>\n<text id=\"search\" "
		     "class=\"btn\" x=\"%d\" y=\"24\" text-anchor=\"end\">"
		     "Search</text>\n<text id=\"details\" x=\"%d\" y=\"%d\"> "
		     "</text>\n<text id=\"matched\" x=\"%d\" y=\"%d\" "
		     "text-anchor=\"end\"> </text>\n<g id=\"frames\">\n",
		  PAD, W - PAD, PAD, height - 10, W - PAD, height - 10);
	if (!root->total) {
		outbuf_printf(b, "</g>\n<text x=\"%d\" y=\"%d\" "
			     "text-anchor=\"middle\">No samples</text>\n"
			     "</svg>\n",
			  W / 2, TOP + FRAME_H);
		return 0;
	}
	scale = (W - 2 * PAD) / (double)root->total;
	stack = malloc((FLAMEGRAPH_DEPTH_MAX + 4) * sizeof(*stack));
	xs = malloc((FLAMEGRAPH_DEPTH_MAX + 4) * sizeof(*xs));
	if (!stack || !xs) {
		free(stack);
		free(xs);
		return -ENOMEM;
	}
	/* Depth first; xs[d] is where the next child at depth d starts
	 * (in samples).  Frames too narrow to see are left out with what
	 * they hold. */
	v = root->first;
	xs[0] = 0;
	while (v && !b->err) {
		const struct fg_node *nd = &fg->nodes[v];
		double x = xs[depth];
		int visible = (double)nd->total * scale >= MIN_W;

		xs[depth] += (double)nd->total;
		if (visible)
			frame(b, fg, nd, x, height);
		if (visible && nd->first && depth + 1 < FLAMEGRAPH_DEPTH_MAX + 2) {
			stack[depth++] = v;
			xs[depth] = x;
			v = nd->first;
			continue;
		}
		while (!fg->nodes[v].next && depth)
			v = stack[--depth];
		v = fg->nodes[v].next;
	}
	outbuf_puts(b, "</g>\n</svg>\n");
	free(stack);
	free(xs);
	return 0;
}
