/*
 * hc.h - active health checks: TCP, HTTP, HTTPS, MySQL, PostgreSQL and
 * Redis probes, and DNS and UDP ones over datagrams, run by the health
 * module's own threads.
 *
 * The module knows the check specs and its own event bases, nothing else: it
 * never touches sessions or balancer state. Each of its threads runs many
 * non-blocking probes on one event loop (a hung server costs a timer, not a
 * thread). Each result is posted, as a struct hc_result, to the mailbox the
 * caller gave (lb/core/core.h), which delivers it on the caller's loop; the
 * module's own threads get their work through mailboxes of their own.
 *
 * Scheduling: every target is probed once at hc_start(), then every
 * interval, each probe planned from the plan of the previous one (not its
 * end). The second probe comes at a random point of the first interval, so
 * that a large pool started at once is spread evenly over the interval
 * instead of probing in one burst; the period is exact after that. A target
 * never has two probes in flight: a slot that comes while the previous
 * probe still runs is skipped, unless the previous one's timeout has come
 * (hc_probe_end_if_due).
 */
#ifndef HC_H
#define HC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "agent.h"
#include "conf.h"

#define HC_DETAIL_MAX 160

/* What to probe; hc_add copies it (strings and bytes included). */
struct hc_spec {
    uint32_t id;                    /* the caller's key, echoed in results */
    enum conf_check kind;           /* tcp, http(s), mysql, pgsql, redis,
                                       dns, udp, grpc; not used by an agent */
    bool is_agent;                  /* an agent check (a server's
                                       agent_port, agent.h): send `send`,
                                       read one line; passes when it parses */
    struct sockaddr_storage addr;   /* with check_port already applied */
    socklen_t addr_len;
    const char *host;               /* Host header and TLS SNI */
    const char *path;               /* HTTP(S) request path */
    struct conf_expect expect;      /* accepted status codes */
    struct conf_expect warn;        /* check_warn: alive but overloaded */
    uint64_t interval_ms;
    uint64_t timeout_ms;            /* the whole probe, connect included */
    bool verify;                    /* HTTPS: verify the certificate */
    const char *ca;                 /* HTTPS: CA file, "" = system default */
    bool reuse;                     /* HTTP(S): keep the connection between
                                       probes (check_reuse) */
    const char *user;               /* mysql, pgsql: check_user, "" = none */
    const char *database;           /* pgsql: check_database */
    enum conf_role role;            /* mysql, redis: check_role */
    const char *grpc_service;       /* grpc: check_grpc_service, "" = all */
    bool tls;                       /* grpc: check_tls, ALPN h2 */
    enum conf_proxy send_proxy;     /* check_send_proxy: the version of the
                                       PROXY header (v1 UNKNOWN, v2 LOCAL)
                                       that opens every check connection;
                                       OFF for none (hc_check_send_proxy) */
    const char *dns_name;           /* dns: check_dns_name */
    uint16_t dns_type;              /* dns: check_dns_type */
    uint16_t dns_rcodes;            /* dns: bit n set when RCODE n passes */
    const uint8_t *send;            /* udp: check_send; agent: agent_send;
                                       send_len bytes */
    size_t send_len;
    const uint8_t *expect_bytes;    /* udp: how a reply starts; 0 bytes:
                                       any reply passes */
    size_t expect_bytes_len;
    bool is_known;                  /* its state came with a hand-over
                                       (lb -x): first probe at a random
                                       point of the first interval */
};

/* The send_proxy of a server's checks: with the pool's check_send_proxy,
 * the server's own send_proxy version, or v1 when it sends none (as
 * HAProxy's check-send-proxy: a backend that wants a header but gets no
 * client traffic through lb still gets one); without, none. */
static inline enum conf_proxy
hc_check_send_proxy(bool check_send_proxy, enum conf_proxy server_send_proxy)
{
    if (!check_send_proxy)
        return CONF_PROXY_OFF;
    return server_send_proxy == CONF_PROXY_V2 ? CONF_PROXY_V2 : CONF_PROXY_V1;
}

struct hc_result {
    uint32_t id;
    uint64_t seq;                   /* per target, rising with probe start */
    bool passed;
    bool is_warning;                /* passed, with a code in check_warn */
    char detail[HC_DETAIL_MAX];     /* "HTTP 500 Internal Server Error",
                                       "connect: connection refused", ... */
    double duration_ms;
    double lag_ms;                  /* start against plan */
    uint64_t started_mono_ms;       /* CLOCK_MONOTONIC */
    double started_at;              /* unix seconds */
    struct hc_agent_reply agent;    /* an agent's that passed: its reply;
                                       the detail is its line */
};

struct hc;
struct lb_mailbox;

/* A module with `threads` threads (not started) that posts its results to
 * results (a mailbox of struct hc_result). NULL with err set on failure.
 * Main thread. */
struct hc *hc_new(unsigned threads, struct lb_mailbox *results, char *err,
                  size_t errlen);

/* Adds a target, before hc_start. -1 with err set (bad CA file, memory). */
int hc_add(struct hc *hc, const struct hc_spec *spec, char *err, size_t errlen);

/* Starts the threads; every target is probed at once, but one whose
 * spec is_known, within its first interval. -1 on failure. */
int hc_start(struct hc *hc);

/* Replaces the set of targets, after hc_start: an id missing from specs is
 * removed (a probe in flight is dropped), an id already known takes the new
 * settings from its next probe and keeps its schedule, a new id is probed
 * at once. -1 with err set (a CA file that cannot be loaded, memory), and
 * then nothing changed. Main thread. */
int hc_update(struct hc *hc, const struct hc_spec *specs, size_t n, char *err,
              size_t errlen);

/* Asks for a probe of target id now, out of schedule (live traffic saw it
 * fail). Ignored when a probe of it is already in flight; the schedule is
 * unchanged. Any thread, after hc_start. */
void hc_probe_now(struct hc *hc, uint32_t id);

/* Stops and joins the threads (probes in flight are dropped); frees all. */
void hc_free(struct hc *hc);

/* Parses an HTTP status line ("HTTP/1.1 200 OK"): the code into *code and
 * the reason into reason (may be empty). -1 when the line is malformed or
 * its code is outside 100..599; then neither *code nor reason is written.
 * Pure; exposed for the unit tests. */
int hc_parse_status_line(const char *line, size_t len, int *code,
                         char *reason, size_t reason_len);

/* The schedule: when the probe after the one planned at `planned` is due,
 * the timer of that slot having fired at `now`. seq is the number of probes
 * started so far; rnd a random number (the spread of the second probe).
 * Pure; exposed for the unit tests. */
uint64_t hc_sched_next(uint64_t planned, uint64_t now, uint64_t interval,
                       uint64_t seq, uint64_t rnd);

/* True when code is in one of the ranges. Pure. */
bool hc_expect_match(const struct conf_expect *e, int code);

/* check_reuse: whether an answer's head, after its status line, leaves the
 * connection usable for the next probe. Fed the bytes as they come; keeps
 * one header line (HC_HEAD_LINE_MAX) at a time. Reusable: a Content-Length
 * (one, plain decimal, at most HC_HEAD_BODY_MAX), no Transfer-Encoding, no
 * "Connection: close", CRLF line ends, the whole head at most HC_HEAD_MAX
 * bytes. Pure; exposed for the unit tests. */
#define HC_HEAD_MAX 4096
#define HC_HEAD_LINE_MAX 256
#define HC_HEAD_BODY_MAX (64 * 1024)

struct hc_head {
    char line[HC_HEAD_LINE_MAX];
    size_t len;                     /* bytes of the current line */
    size_t head_bytes;              /* fed so far */
    int64_t content_length;         /* -1 until seen */
};

void hc_head_init(struct hc_head *h);
/* Feeds n more bytes of the head. 0: need more (all n used); 1: the head
 * ended and the connection is reusable once content_length body bytes are
 * read (*used bytes were head, the rest is body); -1: do not reuse (*used
 * 0). */
int hc_head_feed(struct hc_head *h, const char *buf, size_t n, size_t *used);

/* The verdict of an HTTP check on the first len bytes of its answer, all
 * that has arrived so far (the prober reads at most cap). false while the
 * status line has no line end yet and fewer than cap bytes came: read more.
 * Else true, with *passed (and *warned: a code in warn, which may be NULL,
 * looked at before expect; a warning also passes) and the detail for logs
 * and /stats ("HTTP 503
 * Service Unavailable", "malformed status line"). Bytes after the first
 * line end are never looked at, so the verdict does not depend on how the
 * answer was split into reads. Pure; exposed for the unit tests. */
bool hc_status_verdict(const char *buf, size_t len, size_t cap,
                       const struct conf_expect *expect, const struct conf_expect *warn,
                       bool *passed, bool *warned, char *detail, size_t detail_len);

#endif /* HC_H */
