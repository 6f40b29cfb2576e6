/*
 * dap_msg: DAP messages as typed C values.
 *
 * Parsing turns a message body into struct dap_message.  The JSON tree
 * (cJSON) stays inside the message: `arguments` (requests), `body`
 * (responses, events) are borrowed pointers into it, valid until
 * dap_message_free().  Request handlers convert `arguments` into their own
 * typed structs with the dap_arg_* helpers at the edge; cJSON does not go
 * further into the core.
 *
 * Building: dap_response_new()/dap_event_new() create a message object the
 * caller fills (body is a cJSON object it may add to), then
 * dap_message_encode() serialises it with its header.
 */
#ifndef DAP_MSG_H
#define DAP_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>

#define DAP_JSON_DEPTH_MAX 64
#define DAP_COMMAND_MAX 64

enum dap_type { DAP_REQUEST = 1, DAP_RESPONSE, DAP_EVENT };

struct dap_message {
	enum dap_type type;
	int64_t seq;
	char command[DAP_COMMAND_MAX]; /* request/response command, event name */
	/* responses */
	int64_t request_seq;
	int success;
	char *message;          /* owned; error text or NULL */
	/* borrowed views into root */
	cJSON *arguments;       /* request arguments or NULL */
	cJSON *body;            /* response/event body or NULL */
	cJSON *root;            /* owned JSON tree */
};

/*
 * Parses one message body.  Checks nesting depth (DAP_JSON_DEPTH_MAX)
 * before handing the text to cJSON.  Returns 0 and a new message in *out
 * (caller frees), or DAP_EJSON / DAP_EDEPTH / DAP_EPROTO (-ENOMEM) with a
 * reason in err.  On DAP_EPROTO where a "seq" and "command" could still be
 * read, *seq_out and cmd_out (DAP_COMMAND_MAX bytes) are filled so the caller
 * can send an error response, and so on -ENOMEM when cJSON ran out of
 * memory reading the text (dap_envelope_scan's); otherwise *seq_out is -1.
 *
 * Details: seq_out, cmd_out and err may be NULL.  *seq_out is set only for
 * what may be a request (type "request", missing or unknown), never for a
 * bad response or event; cmd_out is "" when the command is unreadable.
 * Checked: "seq" a non-negative integer; "type" one of the three; requests:
 * "command" a string shorter than DAP_COMMAND_MAX, "arguments" an object or
 * absent (null = absent); events: "event" likewise; responses: integer
 * "request_seq", boolean "success", string "command", "message" a string
 * or absent.  JSON text after the value (other than white space) is
 * DAP_EJSON.
 */
/*
 * The top-level "seq" (a non-negative integer of up to 15 digits, else -1)
 * and "command" (a string without escapes shorter than cmdlen, else "") of
 * a message text that may not parse: what an error reply needs when cJSON
 * ran out of memory reading it.  Reads t[0..len) only, allocates nothing.
 */
void dap_envelope_scan(const char *t, size_t len, int64_t *seq, char *cmd,
		       size_t cmdlen);

int dap_message_parse(const char *text, size_t len, struct dap_message **out,
		      int64_t *seq_out, char *cmd_out, char *err, size_t errlen);

void dap_message_free(struct dap_message *msg);

/* A deep copy (caller frees), or NULL when out of memory. */
struct dap_message *dap_message_copy(const struct dap_message *msg);

/* A new response to (request_seq, command).  body is an empty object the
 * caller may fill; message is copied when not NULL.  Every builder returns
 * NULL on allocation failure or when the command/event name has
 * DAP_COMMAND_MAX characters or more.  The envelope (type, command,
 * success, message) is taken from the struct at encode time. */
struct dap_message *dap_response_new(int64_t request_seq, const char *command,
				     int success, const char *message);

/*
 * The error ids of the agent's error responses (body.error.id), named
 * once for the agent and the CLI, which turns them into its exit codes
 * (cli_exit_of_error, cli/target.h).
 */
enum dap_error_id {
	DAP_ERROR_FAILED = 1,     /* the request failed; the text says why */
	DAP_ERROR_RAISED = 2,     /* evaluate: the code raised (body.output) */
	DAP_ERROR_GIL = 3,        /* the GIL did not come in time */
	DAP_ERROR_SQL = 4,        /* probing/query: the statement failed */
	DAP_ERROR_AUTH = 401,     /* the token is missing or wrong */
	DAP_ERROR_READONLY = 403, /* refused in read-only mode */
};

/* The error id of a failed response (body.error.id), or 0. */
int dap_error_id(const struct dap_message *resp);

/* An error response whose body carries
 * {"error":{"id":id,"format":text,"showUser":true}} as VS Code expects;
 * text (also ->message) is the formatted text, cut at 16 KiB. */
struct dap_message *dap_error_new(int64_t request_seq, const char *command,
				  int id, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

struct dap_message *dap_event_new(const char *event);

/* A new request (for clients); takes ownership of args (may be NULL),
 * freeing it on failure too. */
struct dap_message *dap_request_new(int64_t seq, const char *command,
				    cJSON *args);

/*
 * Serialises msg with its Content-Length header into a heap buffer (caller
 * frees) and sets *len.  `seq` is written as given (the sender numbers).
 * Returns NULL on allocation failure.
 */
char *dap_message_encode(struct dap_message *msg, int64_t seq, size_t *len);

/*
 * Typed argument accessors for handlers.  Each returns 0 and stores the
 * value, 1 when the key is absent (value left as is: put the default there
 * first), or DAP_EPROTO when present with the wrong type, writing
 * "argument 'key' must be a <type>" into err.
 *
 * A JSON null counts as absent, and so does every key when args is NULL or
 * not an object.  Keys are case-sensitive.  An int must be an integral
 * number within int64_t (1.0 is fine, 1.5 and 1e300 are not); a bool must
 * be true or false (not 0/1).
 */
int dap_arg_int(const cJSON *args, const char *key, int64_t *out, char *err,
		size_t errlen);
int dap_arg_bool(const cJSON *args, const char *key, int *out, char *err,
		 size_t errlen);
/* *out borrows the string inside args. */
int dap_arg_string(const cJSON *args, const char *key, const char **out,
		   char *err, size_t errlen);
/* *out borrows the object/array. */
int dap_arg_object(const cJSON *args, const char *key, const cJSON **out,
		   char *err, size_t errlen);
int dap_arg_array(const cJSON *args, const char *key, const cJSON **out,
		  char *err, size_t errlen);

#endif
