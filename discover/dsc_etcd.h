/*
 * dsc_etcd.h - the etcd source of discovery (discover.h): each key under a
 * prefix is one server, followed through etcd's v3 JSON gateway (etcd 3.4:
 * /v3/kv/range, then one long-lived /v3/watch).
 *
 * The spec: name is the prefix ("/services/web/"); endpoints the gateway's
 * URLs, tried in turn (the next one after a failure, with a backoff from
 * DSC_ETCD_BACKOFF_MIN_MS doubling to DSC_ETCD_BACKOFF_MAX_MS); user and
 * password, when set, log in (POST /v3/auth/authenticate) and send the
 * token; tls_ca the CA file for https:// (the system's when empty); label
 * the pool, for log lines. port and interval_ms are not used: etcd says
 * when something changed.
 *
 * A key's server is named after the key's last segment (after its last
 * '/'), which must be a valid config server name; its value is
 * "ADDRESS:PORT" or {"address":"ADDRESS:PORT","weight":N}, the address an
 * IP literal ("[v6]:port" for IPv6): a host name would have to be resolved
 * on main's thread. A key that does not make a server is skipped and
 * logged (event=discover_bad_value).
 *
 * What etcd's gateway sends is read by etcd_watch.c, pure (no I/O, no
 * clock), with the calls below: the unit test and the fuzz target link
 * them alone.
 */
#ifndef DSC_ETCD_H
#define DSC_ETCD_H

#include "discover.h"

#define DSC_ETCD_BACKOFF_MIN_MS 100
#define DSC_ETCD_BACKOFF_MAX_MS 5000
/* The longest JSON object the watch stream may send: a watch response with
 * many events (a transaction of thousands of puts) is one object. */
#define DSC_ETCD_OBJECT_MAX (64u << 20)

extern const struct dsc_source dsc_etcd;

/* ------------------------------------------- the gateway's JSON (pure) */

/* Reads a stream of JSON objects (the watch's chunked body) arriving in
 * pieces of any size: each whole object is handed out once, the same
 * whatever the cuts. Whitespace between objects is skipped; anything else
 * there, or an object longer than max, breaks the stream for good. */
struct dsc_etcd_stream {
    char *buf;                          /* the object being read */
    size_t len, cap, max;
    unsigned depth;                     /* open { and [ */
    bool is_in_string, is_escaped, is_broken;
};

/* One whole object of len bytes (not NUL-terminated, valid during the
 * call): 0 to go on, -1 to stop (the feed returns -1 then). */
typedef int (*dsc_etcd_object_pt)(void *arg, const char *obj, size_t len);

void dsc_etcd_stream_init(struct dsc_etcd_stream *s, size_t max);
void dsc_etcd_stream_fini(struct dsc_etcd_stream *s);
/* Feeds n bytes: 0, or -1 when the stream is broken (err says why, unless
 * fn stopped it) or fn returned -1. */
int dsc_etcd_stream_feed(struct dsc_etcd_stream *s, const char *data, size_t n,
                         dsc_etcd_object_pt fn, void *arg, char *err, size_t errlen);
/* Whether an object was begun and not finished. */
bool dsc_etcd_stream_is_pending(const struct dsc_etcd_stream *s);

/* A key and its value, base64-decoded and NUL-terminated (either may hold
 * a NUL of its own: len says). */
struct dsc_etcd_kv {
    char *key, *value;
    size_t key_len, value_len;
    int64_t mod_revision;               /* of its last change (its deletion) */
    bool is_delete;                     /* a DELETE event (value empty) */
};

/* One response of the watch stream. */
struct dsc_etcd_watch_msg {
    int64_t revision;                   /* header.revision, 0 when absent */
    bool is_created;                    /* the watch is in place */
    bool is_canceled;                   /* it ended: read the range again */
    int64_t compact_revision;           /* > 0: what was asked is compacted */
    char reason[160];                   /* cancel_reason, or an error's message */
    bool is_error;                      /* {"error":...}: the stream failed */
    struct dsc_etcd_kv *events;
    size_t nevents;
};

/* A range response. */
struct dsc_etcd_range {
    int64_t revision;
    struct dsc_etcd_kv *kvs;
    size_t nkvs;
    bool is_more;                       /* cut by a limit: more keys follow */
};

/* Parse one object of the watch stream: 0 and *out (dsc_etcd_watch_fini),
 * or -1 with err set (nothing to free). */
int dsc_etcd_watch_parse(const char *json, size_t len, struct dsc_etcd_watch_msg *out,
                         char *err, size_t errlen);
void dsc_etcd_watch_fini(struct dsc_etcd_watch_msg *m);
/* A /v3/kv/range answer: 0 and *out (dsc_etcd_range_fini), or -1. */
int dsc_etcd_range_parse(const char *json, size_t len, struct dsc_etcd_range *out, char *err,
                         size_t errlen);
void dsc_etcd_range_fini(struct dsc_etcd_range *r);
/* The token of a /v3/auth/authenticate answer into token: 0, or -1. */
int dsc_etcd_token_parse(const char *json, size_t len, char *token, size_t cap, char *err,
                         size_t errlen);
/* The message of an error answer ({"error":..,"message":..}), or the
 * body's start: never fails, for the error text. */
void dsc_etcd_error_text(const char *json, size_t len, char *out, size_t cap);

/* Request bodies, malloc'ed NUL-terminated (the caller frees), NULL when
 * out of memory. range_end is the prefix with its last byte + 1: every
 * key that starts with the prefix. start_revision 0: from now. */
char *dsc_etcd_range_body(const char *prefix);
char *dsc_etcd_watch_body(const char *prefix, int64_t start_revision);
char *dsc_etcd_auth_body(const char *user, const char *password);

/* The server of a key into out: its name is the key's last segment, its
 * address and weight come from the value. 0, or -1 with why in err. */
int dsc_etcd_server_parse(const struct dsc_etcd_kv *kv, struct dsc_server *out, char *err,
                          size_t errlen);

#endif /* DSC_ETCD_H */
