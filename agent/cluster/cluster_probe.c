/*
 * cluster_probe: see cluster_probe.h.
 */
#include "cluster_probe.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fdown.h"
#include "cluster_intern.h"

/* Starts a non-blocking connect to p->addr (numeric or resolved). */
static void probe_start(struct cluster_probe *p)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	struct dap_addr a;
	char port[16];
	int fd;

	p->sock.fd = -1;
	p->up = 0;
	if (dap_addr_parse(p->addr, &a, NULL, 0) || a.kind != DAP_ADDR_TCP)
		return;
	snprintf(port, sizeof(port), "%d", a.port);
	if (getaddrinfo(a.host, port, &hints, &res) || !res)
		return;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd >= 0 && fdown_take(&p->sock, fd) == 0) {
		if (connect(p->sock.fd, res->ai_addr, res->ai_addrlen) == 0)
			p->up = 1;
		else if (errno != EINPROGRESS)
			fdown_close(&p->sock);
	}
	freeaddrinfo(res);
}

void cluster_probe_all(struct cluster_probe *ps, size_t n)
{
	struct pollfd pfd[CLUSTER_PROBE_BATCH];
	size_t idx[CLUSTER_PROBE_BATCH];

	for (size_t base = 0; base < n; base += CLUSTER_PROBE_BATCH) {
		size_t m = 0, end = base + CLUSTER_PROBE_BATCH;
		double deadline = cluster_mono_ms() + CLUSTER_PROBE_MS;

		if (end > n)
			end = n;
		for (size_t i = base; i < end; i++) {
			probe_start(&ps[i]);
			if (ps[i].sock.fd >= 0 && !ps[i].up) {
				pfd[m] = (struct pollfd){ps[i].sock.fd,
							 POLLOUT, 0};
				idx[m++] = i;
			}
		}
		while (m > 0) {
			double left = deadline - cluster_mono_ms();
			size_t k = 0;
			int rc;

			if (left <= 0)
				break;
			rc = poll(pfd, m, (int)left + 1);
			if (rc < 0 && errno == EINTR)
				continue;
			if (rc <= 0)
				break;
			for (size_t j = 0; j < m; j++) {
				int soerr = 0;
				socklen_t sl = sizeof(soerr);

				if (!pfd[j].revents) {
					pfd[k] = pfd[j];
					idx[k++] = idx[j];
					continue;
				}
				getsockopt(pfd[j].fd, SOL_SOCKET, SO_ERROR,
					   &soerr, &sl);
				ps[idx[j]].up = soerr == 0;
			}
			m = k;
		}
		for (size_t i = base; i < end; i++)
			fdown_close(&ps[i].sock);
	}
}
