/*
 * dsc_etcd.c - the etcd source of discovery (dsc_etcd.h): one discovery's
 * connection to etcd's JSON gateway, the keys it knows, and the set they
 * make. Non-blocking, on the base it is given (main's): libevent's HTTP
 * client, over bufferevent_openssl for https://.
 *
 * A session is one connection to one endpoint: log in when there is a
 * user, read the range when the keys are not known (first, or after a
 * compaction), then watch from the revision after the last one seen. The
 * watch's answer never ends while all is well: its chunked body is a
 * stream of JSON objects (etcd_watch.c cuts and reads them), one per batch
 * of events. Every failure ends the session the same way: the set is kept,
 * the callback gets the error, and the next endpoint is tried after a
 * backoff (DSC_ETCD_BACKOFF_MIN_MS, doubling to _MAX_MS, back to the
 * minimum once a watch is in place).
 *
 * libevent's HTTP client calls us from inside its own reading; it must not
 * see its connection freed under it. So callbacks only record facts
 * (dsc_etcd_fail) and a session ends from end_ev, on the loop. For the
 * same reason the set is reported from report_ev: one report for all the
 * batches read at once, not one per batch (10,000 puts in a row are 10,000
 * batches, and each report copies and compares the whole set).
 *
 *   IDLE --retry_ev--> AUTH --token--> RANGE --kvs--> WATCH --created--> WATCHING
 *                        \___________________________/^  (keys known: no RANGE)
 *   any state --failure / dropped watch--> IDLE (next endpoint, backoff)
 *   WATCHING --compacted / canceled--> IDLE (at once, the range again)
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core.h"
#include "dsc_etcd.h"

/* auth and range answers, and the connect, within this; the watch, once
 * its headers are in, has no timeout (it may be quiet for days): TCP
 * keepalive finds a peer that went away. */
#define DSC_ETCD_REQUEST_TIMEOUT_MS 3000
#define DSC_ETCD_KEEPALIVE_IDLE_S 10
#define DSC_ETCD_KEEPALIVE_INTVL_S 5
#define DSC_ETCD_KEEPALIVE_CNT 3
#define DSC_ETCD_TOKEN_MAX 512
#define DSC_ETCD_ERROR_MAX 300

enum dsc_etcd_phase {
    DSC_ETCD_IDLE = 0,                  /* no session: waiting for retry_ev */
    DSC_ETCD_AUTH,
    DSC_ETCD_RANGE,
    DSC_ETCD_WATCH,                     /* asked, not created yet */
    DSC_ETCD_WATCHING,
};

/* One key that makes a server; kept sorted by key. */
struct dsc_etcd_entry {
    char *key;
    size_t key_len;
    struct dsc_server srv;
};

/* One discovery's state: made by dsc_etcd_new, freed by dsc_etcd_free
 * (through dsc_new and dsc_free); the thread of its base only. */
struct dsc_etcd {
    struct event_base *base;
    const struct dsc_spec *spec;        /* the struct dsc's: it outlives us */
    dsc_result_pt fn;
    void *arg;
    SSL_CTX *ssl_ctx;                   /* when an endpoint is https:// */
    struct evdns_base *dns;             /* when an endpoint is a host name */
    struct event *retry_ev, *end_ev, *report_ev;

    /* the session */
    enum dsc_etcd_phase phase;
    size_t ep;                          /* spec->endpoints[ep] */
    char url[DSC_ETCD_ERROR_MAX];       /* its text, for errors and /stats */
    struct evhttp_connection *conn;
    struct dsc_etcd_stream stream;
    char token[DSC_ETCD_TOKEN_MAX];
    bool is_ending;                     /* end_ev is coming */
    bool is_range_again;                /* the end is a compaction: no error */
    char error[DSC_ETCD_ERROR_MAX];     /* why the session ends */
    uint64_t backoff_ms;

    /* the keys */
    bool is_known;                      /* read by a range, followed since */
    int64_t revision;                   /* the last one the keys reflect */
    struct dsc_etcd_entry *entries;
    size_t nentries, cap;
};

static struct lb_log_limit dsc_etcd_bad_value_log = LB_LOG_LIMIT(10);

static void dsc_etcd_free(void *state);
static void dsc_etcd_fail(struct dsc_etcd *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- keys */

/* The index of key, or where it would go (*found false). */
static size_t
dsc_etcd_find(const struct dsc_etcd *e, const char *key, size_t len, bool *found)
{
    size_t lo = 0, hi = e->nentries;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct dsc_etcd_entry *m = &e->entries[mid];
        int c = memcmp(m->key, key, m->key_len < len ? m->key_len : len);

        if (c == 0)
            c = m->key_len < len ? -1 : m->key_len > len;
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static void
dsc_etcd_remove(struct dsc_etcd *e, const char *key, size_t len)
{
    bool found;
    size_t i = dsc_etcd_find(e, key, len, &found);

    if (!found)
        return;
    free(e->entries[i].key);
    memmove(&e->entries[i], &e->entries[i + 1], (e->nentries - i - 1) * sizeof(*e->entries));
    e->nentries--;
}

static void
dsc_etcd_log_bad(const struct dsc_etcd *e, const char *key, const char *why)
{
    char qkey[200], qwhy[300];

    lb_log_limited(&dsc_etcd_bad_value_log, CONF_LOG_WARN, "discover_bad_value",
                   "pool=%s key=%s error=%s", e->spec->label,
                   lb_log_quote(qkey, sizeof(qkey), key), lb_log_quote(qwhy, sizeof(qwhy), why));
}

/* A key's new value (or its deletion). A value that makes no server
 * removes the key's server: etcd, not what lb saw before, says where the
 * key's server is (an lb started now would not have it either). -1 only
 * when out of memory. */
static int
dsc_etcd_apply(struct dsc_etcd *e, const struct dsc_etcd_kv *kv)
{
    struct dsc_server srv;
    char why[200];
    bool found;
    size_t i;

    if (kv->is_delete) {
        dsc_etcd_remove(e, kv->key, kv->key_len);
        return 0;
    }
    if (dsc_etcd_server_parse(kv, &srv, why, sizeof(why)) != 0) {
        dsc_etcd_log_bad(e, kv->key, why);
        dsc_etcd_remove(e, kv->key, kv->key_len);
        return 0;
    }
    i = dsc_etcd_find(e, kv->key, kv->key_len, &found);
    if (found) {
        e->entries[i].srv = srv;
        return 0;
    }
    if (e->nentries == e->cap) {
        size_t cap = e->cap != 0 ? 2 * e->cap : 16;
        struct dsc_etcd_entry *grown = realloc(e->entries, cap * sizeof(*grown));

        if (grown == NULL)
            return -1;
        e->entries = grown;
        e->cap = cap;
    }
    memmove(&e->entries[i + 1], &e->entries[i], (e->nentries - i) * sizeof(*e->entries));
    e->entries[i].key = malloc(kv->key_len + 1);
    if (e->entries[i].key == NULL) {
        memmove(&e->entries[i], &e->entries[i + 1], (e->nentries - i) * sizeof(*e->entries));
        return -1;
    }
    memcpy(e->entries[i].key, kv->key, kv->key_len + 1);
    e->entries[i].key_len = kv->key_len;
    e->entries[i].srv = srv;
    e->nentries++;
    return 0;
}

static void
dsc_etcd_clear(struct dsc_etcd *e)
{
    for (size_t i = 0; i < e->nentries; i++)
        free(e->entries[i].key);
    e->nentries = 0;
}

/* By name, then by key: entries sit in key order, so their addresses are
 * in key order too. */
static int
dsc_etcd_entry_cmp(const void *a, const void *b)
{
    const struct dsc_etcd_entry *x = *(const struct dsc_etcd_entry *const *)a;
    const struct dsc_etcd_entry *y = *(const struct dsc_etcd_entry *const *)b;
    int c = strcmp(x->srv.name, y->srv.name);

    return c != 0 ? c : (x > y) - (x < y);
}

/* The whole set, sorted by name, to the callback. Two keys with one last
 * segment ("/a/web1", "/b/web1") would make two servers of one name: the
 * first key (in key order) keeps it. */
static void
dsc_etcd_report(struct dsc_etcd *e)
{
    const struct dsc_etcd_entry **order;
    struct dsc_server *set;
    size_t n = 0;
    char error[DSC_NAME_MAX + 64];

    if (e->nentries == 0) {
        snprintf(error, sizeof(error), "no server under %s", e->spec->name);
        e->fn(e->arg, NULL, 0, error);
        return;
    }
    order = malloc(e->nentries * sizeof(*order));
    set = malloc(e->nentries * sizeof(*set));
    if (order == NULL || set == NULL) {
        free(order);
        free(set);
        e->fn(e->arg, NULL, 0, "out of memory");
        return;
    }
    for (size_t i = 0; i < e->nentries; i++)
        order[i] = &e->entries[i];
    qsort(order, e->nentries, sizeof(*order), dsc_etcd_entry_cmp);
    for (size_t i = 0; i < e->nentries; i++) {
        if (n > 0 && strcmp(set[n - 1].name, order[i]->srv.name) == 0) {
            dsc_etcd_log_bad(e, order[i]->key, "another key has this server name");
            continue;
        }
        set[n++] = order[i]->srv;
    }
    e->fn(e->arg, set, n, NULL);
    free(order);
    free(set);
}

static void
dsc_etcd_on_report(evutil_socket_t fd, short what, void *arg)
{
    struct dsc_etcd *e = arg;

    if (e->is_known)
        dsc_etcd_report(e);
}

/* ---------------------------------------------------------------- sessions */

static void
dsc_etcd_fail(struct dsc_etcd *e, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (e->is_ending)
        return;                         /* the first cause is the one told */
    n = snprintf(e->error, sizeof(e->error), "%s: ", e->url);
    va_start(ap, fmt);
    vsnprintf(e->error + n, sizeof(e->error) - (size_t)n, fmt, ap);
    va_end(ap);
    e->is_ending = true;
    event_active(e->end_ev, 0, 0);
}

static void
dsc_etcd_url(const struct conf_endpoint *ep, char *out, size_t len)
{
    bool is_v6 = strchr(ep->host, ':') != NULL;

    snprintf(out, len, "%s://%s%s%s:%u", ep->is_tls ? "https" : "http", is_v6 ? "[" : "",
             ep->host, is_v6 ? "]" : "", ep->port);
}

static const char *
dsc_etcd_req_error(enum evhttp_request_error error)
{
    switch (error) {
    case EVREQ_HTTP_TIMEOUT:
        return "no answer in time";
    case EVREQ_HTTP_EOF:
        return "connection closed";
    case EVREQ_HTTP_INVALID_HEADER:
        return "invalid HTTP answer";
    case EVREQ_HTTP_BUFFER_ERROR:
        return "connection failed";
    case EVREQ_HTTP_REQUEST_CANCEL:
        return "canceled";
    case EVREQ_HTTP_DATA_TOO_LONG:
        return "answer too long";
    }
    return "failed";
}

static void
dsc_etcd_on_req_error(enum evhttp_request_error error, void *arg)
{
    struct dsc_etcd *e = arg;
    unsigned long ssl_err = ERR_get_error();
    char ssl_text[160] = "";

    if (ssl_err != 0)
        ERR_error_string_n(ssl_err, ssl_text, sizeof(ssl_text));
    ERR_clear_error();
    if (ssl_err != 0)
        dsc_etcd_fail(e, "%s (%s)", dsc_etcd_req_error(error), ssl_text);
    else if (e->phase == DSC_ETCD_WATCHING)
        dsc_etcd_fail(e, "watch dropped (%s)", dsc_etcd_req_error(error));
    else
        dsc_etcd_fail(e, "%s", dsc_etcd_req_error(error));
}

/* A unary answer's body (req NULL: it failed, on_req_error said why). */
static const char *
dsc_etcd_answer(struct dsc_etcd *e, struct evhttp_request *req, const char *what, size_t *len)
{
    struct evbuffer *in;
    const char *body;
    int code;

    if (req == NULL || e->is_ending) {
        dsc_etcd_fail(e, "%s: connection failed", what);
        return NULL;
    }
    code = evhttp_request_get_response_code(req);
    in = evhttp_request_get_input_buffer(req);
    *len = evbuffer_get_length(in);
    body = (const char *)evbuffer_pullup(in, -1);
    if (code == 0) {                    /* evhttp's way to say it could not connect */
        dsc_etcd_fail(e, "%s: cannot connect", what);
        return NULL;
    }
    if (code != 200) {
        char text[160];

        dsc_etcd_error_text(body != NULL ? body : "", *len, text, sizeof(text));
        dsc_etcd_fail(e, "%s: HTTP %d: %s", what, code, text);
        return NULL;
    }
    return body != NULL ? body : "";
}

static void dsc_etcd_on_auth(struct evhttp_request *req, void *arg);
static void dsc_etcd_on_range(struct evhttp_request *req, void *arg);
static void dsc_etcd_on_watch_end(struct evhttp_request *req, void *arg);
static void dsc_etcd_on_watch_chunk(struct evhttp_request *req, void *arg);
static int dsc_etcd_on_watch_headers(struct evhttp_request *req, void *arg);

/* POSTs body (freed here) to path on the session's connection. */
static void
dsc_etcd_post(struct dsc_etcd *e, const char *path, char *body,
              void (*done)(struct evhttp_request *, void *))
{
    struct evhttp_request *req;
    struct evkeyvalq *h;
    char host[CONF_HOST_MAX + 16];

    if (body == NULL || (req = evhttp_request_new(done, e)) == NULL) {
        free(body);
        dsc_etcd_fail(e, "out of memory");
        return;
    }
    evhttp_request_set_error_cb(req, dsc_etcd_on_req_error);
    /* A whole answer is held until it ends: bounded. The watch's is
     * endless (libevent counts the limit over the whole stream) and held a
     * chunk at a time, each one of etcd's messages. */
    evhttp_connection_set_max_body_size(e->conn, done == dsc_etcd_on_watch_end
                                                     ? EV_SIZE_MAX : DSC_ETCD_OBJECT_MAX);
    if (done == dsc_etcd_on_watch_end) {
        evhttp_request_set_header_cb(req, dsc_etcd_on_watch_headers);
        evhttp_request_set_chunked_cb(req, dsc_etcd_on_watch_chunk);
    }
    h = evhttp_request_get_output_headers(req);
    snprintf(host, sizeof(host), "%s:%u", e->spec->endpoints[e->ep].host,
             e->spec->endpoints[e->ep].port);
    evhttp_add_header(h, "Host", host);
    evhttp_add_header(h, "Content-Type", "application/json");
    if (e->token[0] != '\0')
        evhttp_add_header(h, "Authorization", e->token);
    evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
    free(body);
    if (evhttp_make_request(e->conn, req, EVHTTP_REQ_POST, path) != 0)
        dsc_etcd_fail(e, "%s: cannot send", path);
}

static void
dsc_etcd_ask_next(struct dsc_etcd *e)
{
    if (!e->is_known) {
        e->phase = DSC_ETCD_RANGE;
        dsc_etcd_post(e, "/v3/kv/range", dsc_etcd_range_body(e->spec->name), dsc_etcd_on_range);
        return;
    }
    e->phase = DSC_ETCD_WATCH;
    dsc_etcd_stream_fini(&e->stream);
    dsc_etcd_stream_init(&e->stream, DSC_ETCD_OBJECT_MAX);
    dsc_etcd_post(e, "/v3/watch", dsc_etcd_watch_body(e->spec->name, e->revision + 1),
                  dsc_etcd_on_watch_end);
}

static void
dsc_etcd_on_auth(struct evhttp_request *req, void *arg)
{
    struct dsc_etcd *e = arg;
    const char *body;
    char err[200];
    size_t len;

    if ((body = dsc_etcd_answer(e, req, "authenticate", &len)) == NULL)
        return;
    if (dsc_etcd_token_parse(body, len, e->token, sizeof(e->token), err, sizeof(err)) != 0) {
        dsc_etcd_fail(e, "authenticate: %s", err);
        return;
    }
    dsc_etcd_ask_next(e);
}

static void
dsc_etcd_on_range(struct evhttp_request *req, void *arg)
{
    struct dsc_etcd *e = arg;
    struct dsc_etcd_range r;
    const char *body;
    char err[200];
    size_t len;
    int rc = 0;

    if ((body = dsc_etcd_answer(e, req, "range", &len)) == NULL)
        return;
    if (dsc_etcd_range_parse(body, len, &r, err, sizeof(err)) != 0) {
        dsc_etcd_fail(e, "range: %s", err);
        return;
    }
    if (r.is_more) {                    /* no limit is asked: etcd cut it */
        dsc_etcd_range_fini(&r);
        dsc_etcd_fail(e, "range: the answer is incomplete");
        return;
    }
    /* the range replaces what was known: keys deleted while lb was not
     * watching (past a compaction) go */
    dsc_etcd_clear(e);
    for (size_t i = 0; i < r.nkvs && rc == 0; i++)
        rc = dsc_etcd_apply(e, &r.kvs[i]);
    dsc_etcd_range_fini(&r);
    if (rc != 0) {
        dsc_etcd_fail(e, "range: out of memory");
        return;
    }
    e->revision = r.revision;
    e->is_known = true;
    lb_log(CONF_LOG_INFO, "discover_range", "pool=%s endpoint=%s revision=%" PRId64 " keys=%zu",
           e->spec->label, e->url, e->revision, e->nentries);
    event_active(e->report_ev, 0, 0);
    dsc_etcd_ask_next(e);
}

/* The watch's headers are in: from now on it may be quiet for as long as
 * nothing changes. */
static int
dsc_etcd_on_watch_headers(struct evhttp_request *req, void *arg)
{
    struct dsc_etcd *e = arg;
    struct bufferevent *bev = evhttp_connection_get_bufferevent(e->conn);
    evutil_socket_t fd = bufferevent_getfd(bev);
    int on = 1, idle = DSC_ETCD_KEEPALIVE_IDLE_S, intvl = DSC_ETCD_KEEPALIVE_INTVL_S,
        cnt = DSC_ETCD_KEEPALIVE_CNT;

    if (evhttp_request_get_response_code(req) != 200)
        return 0;                       /* the end callback tells */
    bufferevent_set_timeouts(bev, NULL, NULL);
    /* failing to set them only loses the early warning: ignored */
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    return 0;
}

/* One object of the watch stream. */
static int
dsc_etcd_on_watch_object(void *arg, const char *obj, size_t len)
{
    struct dsc_etcd *e = arg;
    struct dsc_etcd_watch_msg m;
    char err[200];
    int rc = 0;

    if (dsc_etcd_watch_parse(obj, len, &m, err, sizeof(err)) != 0) {
        dsc_etcd_fail(e, "watch: %s", err);
        return -1;
    }
    if (m.is_error) {
        dsc_etcd_fail(e, "watch: %s", m.reason);
        rc = -1;
    } else if (m.compact_revision > 0) {
        /* what lb saw last is compacted: only a range tells the keys now */
        lb_log(CONF_LOG_INFO, "discover_etcd_compacted",
               "pool=%s revision=%" PRId64 " compact_revision=%" PRId64, e->spec->label,
               e->revision, m.compact_revision);
        e->is_known = false;
        e->is_range_again = true;
        dsc_etcd_fail(e, "watch canceled (%s)",
                      m.reason[0] != '\0' ? m.reason : "revision compacted");
        rc = -1;
    } else if (m.is_canceled) {
        /* any other cancel (permission denied, ...): a failure, with its
         * backoff and the next endpoint; reading the range again at once
         * would loop on it */
        dsc_etcd_fail(e, "watch canceled (%s)", m.reason[0] != '\0' ? m.reason : "no reason");
        rc = -1;
    } else {
        if (m.is_created && e->phase == DSC_ETCD_WATCH) {
            e->phase = DSC_ETCD_WATCHING;
            e->backoff_ms = DSC_ETCD_BACKOFF_MIN_MS;
            lb_log(CONF_LOG_INFO, "discover_watch", "pool=%s endpoint=%s from_revision=%" PRId64,
                   e->spec->label, e->url, e->revision + 1);
            event_active(e->report_ev, 0, 0);     /* ok again, and where */
        }
        /* The header's revision is etcd's at the time, not how far this
         * watch has read (its created answer comes before the events it
         * catches up on): resuming after it could skip some. */
        int64_t revision = e->revision;

        for (size_t i = 0; i < m.nevents && rc == 0; i++) {
            rc = dsc_etcd_apply(e, &m.events[i]);
            if (m.events[i].mod_revision > revision)
                revision = m.events[i].mod_revision;
        }
        /* a message applied in part: the keys are not known any more, and
         * a resume from its revision would skip the rest */
        if (rc != 0) {
            e->is_known = false;
            e->is_range_again = true;
            dsc_etcd_fail(e, "watch: out of memory");
        } else {
            e->revision = revision;
        }
        if (m.nevents > 0)
            event_active(e->report_ev, 0, 0);
    }
    dsc_etcd_watch_fini(&m);
    return rc;
}

static void
dsc_etcd_on_watch_chunk(struct evhttp_request *req, void *arg)
{
    struct dsc_etcd *e = arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    char err[200];

    if (e->is_ending)
        return;
    if (evhttp_request_get_response_code(req) != 200)
        return;                         /* an error's body: the end callback */
    while (evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;

        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            break;
        if (dsc_etcd_stream_feed(&e->stream, v.iov_base, v.iov_len, dsc_etcd_on_watch_object, e,
                                 err, sizeof(err)) != 0) {
            if (err[0] != '\0')
                dsc_etcd_fail(e, "watch: %s", err);
            return;
        }
        evbuffer_drain(in, v.iov_len);
    }
}

/* The watch's answer ended: a failed request, an error status, or the
 * stream closed. Each is a dropped watch. */
static void
dsc_etcd_on_watch_end(struct evhttp_request *req, void *arg)
{
    struct dsc_etcd *e = arg;
    size_t len;

    if (e->is_ending)
        return;
    if (dsc_etcd_answer(e, req, "watch", &len) != NULL)
        dsc_etcd_fail(e, "watch ended");
}

static void
dsc_etcd_session_close(struct dsc_etcd *e)
{
    if (e->conn != NULL)
        evhttp_connection_free(e->conn);  /* its requests go without a call */
    e->conn = NULL;
    dsc_etcd_stream_fini(&e->stream);
    e->token[0] = '\0';
    e->phase = DSC_ETCD_IDLE;
}

/* A session on endpoint e->ep. */
static void
dsc_etcd_session_open(struct dsc_etcd *e)
{
    const struct conf_endpoint *ep = &e->spec->endpoints[e->ep];
    struct timeval timeout = lb_tv_ms(DSC_ETCD_REQUEST_TIMEOUT_MS);
    struct bufferevent *bev;

    e->is_ending = e->is_range_again = false;
    e->error[0] = '\0';
    dsc_etcd_url(ep, e->url, sizeof(e->url));
    if (ep->is_tls) {
        SSL *ssl = SSL_new(e->ssl_ctx);
        unsigned char addr[16];
        bool is_ip = inet_pton(AF_INET, ep->host, addr) == 1 ||
                     inet_pton(AF_INET6, ep->host, addr) == 1;

        /* the certificate must name the host (or hold the address) */
        if (ssl == NULL ||
            (!is_ip && (SSL_set_tlsext_host_name(ssl, ep->host) != 1 ||
                        SSL_set1_host(ssl, ep->host) != 1)) ||
            (is_ip && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ep->host) != 1)) {
            SSL_free(ssl);
            dsc_etcd_fail(e, "cannot set up TLS");
            return;
        }
        bev = bufferevent_openssl_socket_new(e->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
                                             BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        /* on failure libevent 2.1 frees ssl itself (BEV_OPT_CLOSE_ON_FREE) */
        if (bev != NULL)        /* etcd closes without close_notify at times */
            bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    } else {
        bev = bufferevent_socket_new(e->base, -1, BEV_OPT_CLOSE_ON_FREE);
    }
    if (bev == NULL ||
        (e->conn = evhttp_connection_base_bufferevent_new(e->base, e->dns, bev, ep->host,
                                                          ep->port)) == NULL) {
        if (bev != NULL)
            bufferevent_free(bev);
        dsc_etcd_fail(e, "out of memory");
        return;
    }
    evhttp_connection_set_timeout_tv(e->conn, &timeout);
    evhttp_connection_set_retries(e->conn, 0);
    if (e->spec->user[0] != '\0') {
        e->phase = DSC_ETCD_AUTH;
        dsc_etcd_post(e, "/v3/auth/authenticate",
                      dsc_etcd_auth_body(e->spec->user, e->spec->password), dsc_etcd_on_auth);
        return;
    }
    dsc_etcd_ask_next(e);
}

static void
dsc_etcd_on_retry(evutil_socket_t fd, short what, void *arg)
{
    dsc_etcd_session_open(arg);
}

/* The session ends (end_ev, on the loop): a compaction reads the range
 * again at once, on the same endpoint; any other end is a failure. */
static void
dsc_etcd_on_end(evutil_socket_t fd, short what, void *arg)
{
    struct dsc_etcd *e = arg;
    struct timeval delay = lb_tv_ms(0);
    bool is_failure = !e->is_range_again;

    dsc_etcd_session_close(e);
    if (is_failure) {
        delay = lb_tv_ms(e->backoff_ms);
        e->backoff_ms = e->backoff_ms * 2 < DSC_ETCD_BACKOFF_MAX_MS ? e->backoff_ms * 2
                                                                    : DSC_ETCD_BACKOFF_MAX_MS;
        e->ep = (e->ep + 1) % e->spec->nendpoints;
    }
    event_add(e->retry_ev, &delay);
    if (is_failure)
        e->fn(e->arg, NULL, 0, e->error);
}

/* ---------------------------------------------------------------- life */

static void *
dsc_etcd_new(struct event_base *base, struct dsc_spec *spec, dsc_result_pt fn, void *arg)
{
    struct dsc_etcd *e = calloc(1, sizeof(*e));
    bool is_tls = false, is_named = false;

    if (e == NULL)
        return NULL;
    e->base = base;
    e->spec = spec;
    e->fn = fn;
    e->arg = arg;
    e->backoff_ms = DSC_ETCD_BACKOFF_MIN_MS;
    dsc_etcd_stream_init(&e->stream, DSC_ETCD_OBJECT_MAX);
    for (size_t i = 0; i < spec->nendpoints; i++) {
        unsigned char addr[16];

        is_tls |= spec->endpoints[i].is_tls;
        is_named |= inet_pton(AF_INET, spec->endpoints[i].host, addr) != 1 &&
                    inet_pton(AF_INET6, spec->endpoints[i].host, addr) != 1;
    }
    e->retry_ev = event_new(base, -1, 0, dsc_etcd_on_retry, e);
    e->end_ev = event_new(base, -1, 0, dsc_etcd_on_end, e);
    e->report_ev = event_new(base, -1, 0, dsc_etcd_on_report, e);
    if (spec->nendpoints == 0 || e->retry_ev == NULL || e->end_ev == NULL ||
        e->report_ev == NULL) {
        dsc_etcd_free(e);
        return NULL;
    }
    /* evhttp resolves a host name with the blocking getaddrinfo unless it
     * has a DNS base: the name of an endpoint is asked without blocking */
    if (is_named &&
        (e->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS)) == NULL) {
        dsc_etcd_free(e);
        return NULL;
    }
    if (is_tls) {
        e->ssl_ctx = SSL_CTX_new(TLS_client_method());
        if (e->ssl_ctx == NULL ||
            SSL_CTX_set_min_proto_version(e->ssl_ctx, TLS1_2_VERSION) != 1 ||
            (spec->tls_ca[0] != '\0'
                 ? SSL_CTX_load_verify_locations(e->ssl_ctx, spec->tls_ca, NULL)
                 : SSL_CTX_set_default_verify_paths(e->ssl_ctx)) != 1) {
            char text[160] = "";

            ERR_error_string_n(ERR_get_error(), text, sizeof(text));
            ERR_clear_error();
            lb_log(CONF_LOG_ERROR, "discover_failed", "pool=%s error=\"TLS: %s\"", spec->label,
                   text);
            dsc_etcd_free(e);
            return NULL;
        }
        SSL_CTX_set_verify(e->ssl_ctx, SSL_VERIFY_PEER, NULL);
    }
    return e;
}

/* The first session at once, from the loop (the caller may hold a lock its
 * callback takes). */
static int
dsc_etcd_start(void *state)
{
    struct dsc_etcd *e = state;
    struct timeval now = lb_tv_ms(0);

    return event_add(e->retry_ev, &now);
}

static void
dsc_etcd_free(void *state)
{
    struct dsc_etcd *e = state;

    if (e == NULL)
        return;
    dsc_etcd_session_close(e);
    dsc_etcd_clear(e);
    free(e->entries);
    if (e->retry_ev != NULL)
        event_free(e->retry_ev);
    if (e->end_ev != NULL)
        event_free(e->end_ev);
    if (e->report_ev != NULL)
        event_free(e->report_ev);
    if (e->dns != NULL)
        evdns_base_free(e->dns, 0);
    SSL_CTX_free(e->ssl_ctx);
    free(e);
}

static void
dsc_etcd_info(void *state, struct dsc_info *out)
{
    const struct dsc_etcd *e = state;

    snprintf(out->endpoint, sizeof(out->endpoint), "%s", e->url);
    out->revision = e->revision;
}

/* A reload keeps a running discovery whose prefix, endpoints (in order),
 * credentials and CA are the same. */
static bool
dsc_etcd_spec_equal(const struct dsc_spec *a, const struct dsc_spec *b)
{
    if (strcmp(a->name, b->name) != 0 || a->nendpoints != b->nendpoints ||
        strcmp(a->user, b->user) != 0 || strcmp(a->password, b->password) != 0 ||
        strcmp(a->tls_ca, b->tls_ca) != 0)
        return false;
    for (size_t i = 0; i < a->nendpoints; i++) {
        if (a->endpoints[i].is_tls != b->endpoints[i].is_tls ||
            a->endpoints[i].port != b->endpoints[i].port ||
            strcmp(a->endpoints[i].host, b->endpoints[i].host) != 0)
            return false;
    }
    return true;
}

const struct dsc_source dsc_etcd = {
    .name = "etcd",
    .new = dsc_etcd_new,
    .free = dsc_etcd_free,
    .spec_equal = dsc_etcd_spec_equal,
    .start = dsc_etcd_start,
    .info = dsc_etcd_info,
};
