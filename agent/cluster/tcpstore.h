/*
 * tcpstore: a client of torch.distributed's TCPStore, speaking its wire
 * protocol directly (no Python, no GIL, no libtorch).
 *
 * The store is a key-value server that a torch job already runs (the
 * rendezvous at MASTER_ADDR:MASTER_PORT).  Messages are a query-type byte
 * followed by arguments; strings and byte vectors are a uint64 length and
 * the bytes, all in the host's byte order (torch sends raw integers).
 * Used: SET (no reply), CHECK (n keys; one byte READY 0 / NOT_READY 1),
 * GET (a vector) and COMPARE_SET (key, expected, desired; the value
 * after it as a vector).  A GET of a missing key makes the server drop the
 * connection, so callers CHECK first.  Keys are sent as given: torch's
 * own client prefixes "/" to every key, so "/probing/x" here is
 * store.get("probing/x") in Python.
 *
 * Two protocol generations, which differ in the numbering of query types:
 *   TCPSTORE_PROTO_1  torch 1.x to 2.1: SET 0, COMPARE_SET 1, GET 2,
 *                     CHECK 4
 *   TCPSTORE_PROTO_2  torch 2.2 on: a VALIDATE query (type 0, magic
 *                     0x3C85F7CE) first on every connection; SET 1,
 *                     COMPARE_SET 2, GET 3, CHECK 5
 * Protocol 1 is tested against torch 1.13; protocol 2 follows torch's
 * TCPStoreBackend.hpp and is untested here.  The wrong generation makes
 * the server drop the connection, so the caller must know which one the
 * job's torch speaks (tcpstore_proto_for).
 *
 * Every call is bounded by the timeout given to tcpstore_connect (for
 * each call).  Blocking; any thread; one thread per connection.
 */
#ifndef TCPSTORE_H
#define TCPSTORE_H

#include <stddef.h>

enum tcpstore_proto { TCPSTORE_PROTO_1 = 1, TCPSTORE_PROTO_2 = 2 };

#define TCPSTORE_KEY_MAX 1024
#define TCPSTORE_VALUE_MAX 65536
#define TCPSTORE_BATCH_MAX 4096 /* keys per tcpstore_check_each */

struct tcpstore;

/* The protocol of a torch version ("1.13.0a0", "2.4.1+cu121").  Returns 0
 * with *out, or -ENOTSUP for text that is not a version. */
int tcpstore_proto_for(const char *torch_version, enum tcpstore_proto *out);

/* Connects to host:port (a name or an address) within timeout_ms.
 * Returns 0 and a new client, or -errno (-ECONNREFUSED: nothing listens
 * yet) with err. */
int tcpstore_connect(const char *host, int port, enum tcpstore_proto proto,
		     int timeout_ms, struct tcpstore **out, char *err,
		     size_t errlen);

/* Closes and frees.  NULL is a no-op. */
void tcpstore_free(struct tcpstore *ts);


/* Sets key to len bytes of value.  0 or -errno with err. */
int tcpstore_set(struct tcpstore *ts, const char *key, const void *value,
		 size_t len, char *err, size_t errlen);

/*
 * torch's compareSet: when key holds expected, or is not set and expected
 * is "", sets it to desired; either way *value is what the key holds
 * afterwards (a NUL-terminated heap copy the caller frees).  So with
 * expected "" the first caller's desired wins and every caller learns
 * the winner: the store serializes them.  (torch answers a key that is
 * not set with expected other than "" by echoing expected.)  Values are
 * text here (no NUL inside).  0 or -errno with err; *value NULL then.
 */
int tcpstore_compare_set(struct tcpstore *ts, const char *key,
			 const char *expected, const char *desired,
			 char **value, char *err, size_t errlen);

/* For each of n keys (at most TCPSTORE_BATCH_MAX), whether it is set:
 * ready[i] = 1 or 0.  The n checks go out in one write.  0 or -errno. */
int tcpstore_check_each(struct tcpstore *ts, const char *const *keys, size_t n,
			unsigned char *ready, char *err, size_t errlen);

/* Gets the values of n keys, which must be set (check first), in one
 * write: values[i] is a NUL-terminated heap copy (caller frees each).
 * Values longer than TCPSTORE_VALUE_MAX fail with -E2BIG.  0 or -errno;
 * on failure no values are left to free. */
int tcpstore_get_each(struct tcpstore *ts, const char *const *keys, size_t n,
		      char **values, char *err, size_t errlen);

#endif
