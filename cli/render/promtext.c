/*
 * promtext: see promtext.h.
 */
#include "render/promtext.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbuf.h"

static int name_ok(const char *s)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == ':'))
			return 0;
	return 1;
}

/* Escaped as the format wants: backslash and newline (HELP), and the
 * double quote too (label values). */
static void escaped(struct outbuf *b, const char *s, int quote)
{
	for (; s && *s; s++) {
		if (*s == '\\')
			outbuf_puts(b, "\\\\");
		else if (*s == '\n')
			outbuf_puts(b, "\\n");
		else if (*s == '"' && quote)
			outbuf_puts(b, "\\\"");
		else
			outbuf_putn(b, s, 1);
	}
}

static void value(struct outbuf *b, double v)
{
	if (isnan(v))
		outbuf_puts(b, "NaN");
	else if (isinf(v))
		outbuf_puts(b, v > 0 ? "+Inf" : "-Inf");
	else
		outbuf_printf(b, "%.17g", v);
}

/* name{agent's labels, sample's labels} value */
static void line(struct outbuf *b, const char *name, const char *const *agent,
		 const cJSON *labels, double v)
{
	const cJSON *l;
	int n = 0;

	outbuf_puts(b, name);
	for (size_t i = 0; agent && agent[i] && agent[i + 1]; i += 2) {
		outbuf_puts(b, n++ ? "," : "{");
		outbuf_printf(b, "%s=\"", agent[i]);
		escaped(b, agent[i + 1], 1);
		outbuf_puts(b, "\"");
	}
	cJSON_ArrayForEach(l, labels)
	{
		if (!cJSON_IsString(l) || !name_ok(l->string))
			continue;
		outbuf_puts(b, n++ ? "," : "{");
		outbuf_printf(b, "%s=\"", l->string);
		escaped(b, l->valuestring, 1);
		outbuf_puts(b, "\"");
	}
	outbuf_puts(b, n ? "} " : " ");
	value(b, v);
	outbuf_puts(b, "\n");
}

static const cJSON *field(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* The family named name in agent a's answer, or NULL. */
static const cJSON *family(const struct prom_agent *a, const char *name)
{
	const cJSON *m;

	cJSON_ArrayForEach(m, a->metrics)
	{
		const cJSON *nm = field(m, "name");

		if (cJSON_IsString(nm) && !strcmp(nm->valuestring, name))
			return m;
	}
	return NULL;
}

/* Whether name came first in an agent before a (so was written). */
static int written(const struct prom_agent *agents, size_t a,
		   const char *name)
{
	for (size_t i = 0; i < a; i++)
		if (family(&agents[i], name))
			return 1;
	return 0;
}

char *promtext_render(const struct prom_agent *agents, size_t n,
		      double scrape_s, size_t *len)
{
	struct outbuf b = {.max = PROMTEXT_MAX};

	outbuf_puts(&b, "# HELP probing_up 1 when the agent answered this "
			"scrape\n# TYPE probing_up gauge\n");
	for (size_t i = 0; i < n; i++)
		line(&b, "probing_up", agents[i].labels, NULL,
		     agents[i].metrics ? 1 : 0);
	for (size_t a = 0; a < n; a++) {
		const cJSON *m;

		cJSON_ArrayForEach(m, agents[a].metrics)
		{
			const cJSON *nm = field(m, "name"),
				    *type = field(m, "type"),
				    *help = field(m, "help");

			if (!cJSON_IsString(nm) || !name_ok(nm->valuestring) ||
			    written(agents, a, nm->valuestring))
				continue;
			outbuf_printf(&b, "# HELP %s ", nm->valuestring);
			escaped(&b, cJSON_IsString(help) ? help->valuestring
							 : "",
				0);
			outbuf_printf(&b, "\n# TYPE %s %s\n", nm->valuestring,
				      cJSON_IsString(type) &&
						      !strcmp(type->valuestring,
							      "counter")
					      ? "counter"
					      : "gauge");
			/* Every agent's samples of it, from this one on. */
			for (size_t k = a; k < n; k++) {
				const cJSON *f = family(&agents[k],
							nm->valuestring), *s;

				cJSON_ArrayForEach(s, field(f, "samples"))
				{
					const cJSON *v = field(s, "value");

					if (cJSON_IsNumber(v))
						line(&b, nm->valuestring,
						     agents[k].labels,
						     field(s, "labels"),
						     v->valuedouble);
				}
			}
		}
	}
	outbuf_puts(&b, "# HELP probing_exporter_scrape_seconds The time "
			"this scrape took, every agent asked\n# TYPE "
			"probing_exporter_scrape_seconds gauge\n");
	line(&b, "probing_exporter_scrape_seconds", NULL, NULL, scrape_s);
	if (b.err) {
		outbuf_release(&b);
		return NULL;
	}
	*len = b.len;
	return b.p;
}
