/*
 * dsc_dns.c - the DNS sources of discovery (discover/discover.h): SRV
 * records, or the A/AAAA records of one name and a fixed port. The rounds
 * of one discovery: the queries of a round, over one connected UDP socket
 * (TCP for a truncated answer), and the server set they add up to.
 *
 * A round asks the name (SRV, or A and AAAA), then the addresses of the SRV
 * targets the additional section did not give, and ends in one callback.
 * Any query that fails (timeout, SERVFAIL, REFUSED, a malformed answer,
 * NXDOMAIN for the name itself) fails the round: a half-answered round
 * must not shrink a pool. NXDOMAIN or no data for a target only means the
 * target has no address. Queries carry consecutive ids from a random start
 * (the index of the query is the id's distance from it) on a socket
 * connected to the resolver, whose source port the kernel picks at random.
 * At most DSC_INFLIGHT queries wait for an answer at a time, each sent
 * again after DSC_RESEND_MS; the round gives up at min(interval,
 * DSC_ROUND_MAX_MS).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "core.h"
#include "dsc_dns.h"
#include "lb_dns.h"

#define DSC_INFLIGHT 64
#define DSC_RESEND_MS 1000
#define DSC_ROUND_MAX_MS 5000
#define DSC_TICK_MS 100
#define DSC_QUERIES_MAX 16384           /* 2 per target: 8,192 targets */
#define DSC_QUERY_LEN_MAX 300
#define DSC_TCP_MAX 65535
#define DSC_PARSE_ERROR_MAX 96          /* dsc_msg_parse's messages are short */
#define DSC_ERROR_MAX (DSC_NAME_MAX + DSC_PARSE_ERROR_MAX + 32)  /* "AAAA NAME over TCP: why" */

struct dsc_tcp {
    struct dsc_dns *d;
    size_t qi;                          /* its query: d->queries[qi] */
    int fd;
    struct event *ev;
    uint8_t out[2 + DSC_QUERY_LEN_MAX];
    size_t out_len, sent;
    uint8_t *in;                        /* 2 length bytes, then the answer */
    size_t got;
};

struct dsc_query {
    char name[DSC_NAME_MAX + 1];
    uint16_t type;
    bool is_target;                     /* NXDOMAIN or no data: no address */
    bool is_done;
    uint64_t sent_ms;                   /* 0: not sent yet */
    struct dsc_tcp *tcp;                /* asked again over TCP */
    struct dsc_msg msg;                 /* when done without error */
};

/* One discovery's DNS state: made by dsc_dns_new, freed by dsc_dns_free
 * (through dsc_new and dsc_free); the thread of its base only. */
struct dsc_dns {
    struct event_base *base;
    const struct dsc_spec *spec;        /* the struct dsc's: it outlives us */
    bool is_srv;                        /* dsc_dns_srv, else dsc_dns_a */
    dsc_result_pt fn;
    void *arg;
    struct event *interval_ev;

    /* the round, while one runs */
    bool is_running;
    int udp_fd;
    struct event *udp_ev;
    struct event *tick_ev;
    uint64_t deadline_ms;
    uint64_t budget_ms;
    uint16_t id_base;
    struct dsc_query *queries;
    size_t nqueries, cap;
    size_t next_send;                   /* queries before it were sent */
    size_t ndone, ninflight;
    char error[DSC_ERROR_MAX];          /* the round's first failure */
};

static void dsc_dns_free(void *state);
static void dsc_round_start(struct dsc_dns *d);
static void dsc_round_end(struct dsc_dns *d);
static void dsc_query_done(struct dsc_dns *d, struct dsc_query *q, const char *error);

/* ---------------------------------------------------------------- queries */

static int
dsc_query_add(struct dsc_dns *d, const char *name, uint16_t type, bool is_target)
{
    struct dsc_query *q;

    if (d->nqueries == DSC_QUERIES_MAX) {
        snprintf(d->error, sizeof(d->error), "more than %d queries in one round",
                 DSC_QUERIES_MAX);
        return -1;
    }
    if (d->nqueries == d->cap) {
        size_t cap = d->cap != 0 ? 2 * d->cap : 8;

        if ((q = realloc(d->queries, cap * sizeof(*q))) == NULL) {
            snprintf(d->error, sizeof(d->error), "out of memory");
            return -1;
        }
        d->queries = q;
        d->cap = cap;
    }
    q = &d->queries[d->nqueries++];
    memset(q, 0, sizeof(*q));
    snprintf(q->name, sizeof(q->name), "%s", name);
    q->type = type;
    q->is_target = is_target;
    return 0;
}

static uint16_t
dsc_query_id(const struct dsc_dns *d, const struct dsc_query *q)
{
    return (uint16_t)(d->id_base + (size_t)(q - d->queries));
}

static const char *
dsc_type_name(uint16_t type)
{
    return type == DSC_TYPE_SRV ? "SRV" : type == DSC_TYPE_A ? "A" : "AAAA";
}

static int
dsc_query_build(const struct dsc_dns *d, const struct dsc_query *q, uint8_t *buf, size_t cap)
{
    return dsc_msg_query(buf, cap, dsc_query_id(d, q), q->name, q->type);
}

static void
dsc_query_send(struct dsc_dns *d, struct dsc_query *q)
{
    uint8_t buf[DSC_QUERY_LEN_MAX];
    int n = dsc_query_build(d, q, buf, sizeof(buf));

    if (q->sent_ms == 0)
        d->ninflight++;
    q->sent_ms = lb_mono_ms();
    if (n < 0) {
        dsc_query_done(d, q, "not a valid DNS name");
        return;
    }
    /* A lost datagram (or ECONNREFUSED from an earlier one: nothing
     * listens) is what DSC_RESEND_MS and the deadline are for. */
    (void)send(d->udp_fd, buf, (size_t)n, MSG_NOSIGNAL);
}

static void
dsc_send_more(struct dsc_dns *d)
{
    while (d->is_running && d->next_send < d->nqueries && d->ninflight < DSC_INFLIGHT)
        dsc_query_send(d, &d->queries[d->next_send++]);
}

/* ---------------------------------------------------------------- TCP */

static void
dsc_tcp_free(struct dsc_query *q)
{
    struct dsc_tcp *t = q->tcp;

    if (t == NULL)
        return;
    if (t->ev != NULL)
        event_free(t->ev);
    if (t->fd >= 0)
        close(t->fd);
    free(t->in);
    free(t);
    q->tcp = NULL;
}

static void
dsc_tcp_on_io(evutil_socket_t fd, short what, void *arg)
{
    struct dsc_tcp *t = arg;
    struct dsc_dns *d = t->d;
    struct dsc_query *q = &d->queries[t->qi];
    char err[DSC_ERROR_MAX];
    ssize_t n;

    if (t->sent < t->out_len) {
        while (t->sent < t->out_len) {
            n = send(fd, t->out + t->sent, t->out_len - t->sent, MSG_NOSIGNAL);
            if (n < 0 && (errno == EAGAIN || errno == EINPROGRESS || errno == ENOTCONN))
                return;
            if (n < 0) {
                snprintf(err, sizeof(err), "%s %s over TCP: %s", dsc_type_name(q->type),
                         q->name, strerror(errno));
                dsc_query_done(d, q, err);
                return;
            }
            t->sent += (size_t)n;
        }
        /* sent: from now on only the answer is waited for */
        event_del(t->ev);
        if (event_assign(t->ev, d->base, fd, EV_READ | EV_PERSIST, dsc_tcp_on_io, t) != 0 ||
            event_add(t->ev, NULL) != 0) {
            dsc_query_done(d, q, "event_add failed");
            return;
        }
    }
    for (;;) {
        size_t want = t->got < 2 ? 2 : 2 + (size_t)((t->in[0] << 8) | t->in[1]);

        if (t->got == want && t->got >= 2) {
            struct dsc_msg m;
            char perr[DSC_PARSE_ERROR_MAX];

            if (dsc_msg_parse(t->in + 2, t->got - 2, dsc_query_id(d, q), q->name, q->type, &m,
                              perr, sizeof(perr)) != 0) {
                /* on its own connection, even "not an answer" is an error */
                char msg[DSC_ERROR_MAX];

                snprintf(msg, sizeof(msg), "%s %s over TCP: %s", dsc_type_name(q->type), q->name,
                         perr);
                dsc_query_done(d, q, msg);
                return;
            }
            q->msg = m;
            dsc_query_done(d, q, NULL);
            return;
        }
        n = recv(fd, t->in + t->got, want - t->got, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            snprintf(err, sizeof(err), "%s %s over TCP: %s", dsc_type_name(q->type), q->name,
                     n == 0 ? "closed before the answer" : strerror(errno));
            dsc_query_done(d, q, err);
            return;
        }
        t->got += (size_t)n;
    }
}

/* The answer came truncated: the same query over TCP (RFC 7766). */
static void
dsc_tcp_start(struct dsc_dns *d, struct dsc_query *q)
{
    struct dsc_tcp *t = calloc(1, sizeof(*t));
    int n;

    if (t == NULL || (t->in = malloc(2 + DSC_TCP_MAX)) == NULL) {
        free(t);
        dsc_query_done(d, q, "out of memory");
        return;
    }
    t->d = d;
    t->qi = (size_t)(q - d->queries);
    t->fd = -1;
    q->tcp = t;
    n = dsc_query_build(d, q, t->out + 2, sizeof(t->out) - 2);
    t->out[0] = (uint8_t)(n >> 8);
    t->out[1] = (uint8_t)n;
    t->out_len = 2 + (size_t)n;
    t->fd = socket(d->spec->endpoint.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (t->fd < 0 ||
        (connect(t->fd, (struct sockaddr *)&d->spec->endpoint, d->spec->endpoint_len) != 0 &&
         errno != EINPROGRESS) ||
        (t->ev = event_new(d->base, t->fd, EV_READ | EV_WRITE | EV_PERSIST, dsc_tcp_on_io, t)) ==
            NULL ||
        event_add(t->ev, NULL) != 0) {
        char err[DSC_ERROR_MAX];

        snprintf(err, sizeof(err), "%s %s over TCP: %s", dsc_type_name(q->type), q->name,
                 strerror(errno));
        dsc_query_done(d, q, err);
    }
}

/* ---------------------------------------------------------------- UDP */

static void
dsc_on_udp(evutil_socket_t fd, short what, void *arg)
{
    struct dsc_dns *d = arg;
    uint8_t buf[DSC_UDP_MAX];

    while (d->is_running) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        struct dsc_query *q;
        struct dsc_msg m;
        char err[DSC_PARSE_ERROR_MAX], msg[DSC_ERROR_MAX];
        size_t i;
        int rc;

        if (n < 0 && errno == ECONNREFUSED) {
            /* an ICMP port unreachable: nothing listens there */
            snprintf(d->error, sizeof(d->error), "%s %s: connection refused by the DNS server",
                     dsc_type_name(d->queries[0].type), d->queries[0].name);
            dsc_round_end(d);
            return;
        }
        if (n < 0)
            return;                     /* EAGAIN */
        if (n < 2)
            continue;
        i = (uint16_t)(((buf[0] << 8) | buf[1]) - d->id_base);
        if (i >= d->next_send || d->queries[i].is_done || d->queries[i].tcp != NULL)
            continue;                   /* a late duplicate, or not ours */
        q = &d->queries[i];
        rc = dsc_msg_parse(buf, (size_t)n, dsc_query_id(d, q), q->name, q->type, &m, err,
                           sizeof(err));
        if (rc == 1)
            continue;                   /* stray: the real one may follow */
        if (rc != 0) {
            snprintf(msg, sizeof(msg), "%s %s: %s", dsc_type_name(q->type), q->name, err);
            dsc_query_done(d, q, msg);
            continue;
        }
        if (m.is_truncated) {
            dsc_msg_fini(&m);
            dsc_tcp_start(d, q);
            continue;
        }
        q->msg = m;
        dsc_query_done(d, q, NULL);
    }
}

/* ---------------------------------------------------------------- a round */

static bool
dsc_has_address(const struct dsc_msg *m, const char *owner)
{
    for (size_t i = 0; i < m->nrrs; i++) {
        const struct dsc_rr *rr = &m->rrs[i];

        if (rr->type != DSC_TYPE_SRV && rr->section == 3 && strcmp(rr->owner, owner) == 0)
            return true;
    }
    return false;
}

/* The SRV answer is in: ask the addresses of the targets it did not give. */
static void
dsc_srv_targets(struct dsc_dns *d)
{
    /* a copy: adding queries moves d->queries, not the records */
    const struct dsc_msg m = d->queries[0].msg;

    for (size_t i = 0; i < m.nrrs; i++) {
        const struct dsc_rr *rr = &m.rrs[i];
        bool is_asked = false;

        if (rr->type != DSC_TYPE_SRV || rr->section != 1 || dsc_has_address(&m, rr->target))
            continue;
        for (size_t j = 1; j < d->nqueries && !is_asked; j++)
            is_asked = strcmp(d->queries[j].name, rr->target) == 0;
        if (is_asked)
            continue;
        if (dsc_query_add(d, rr->target, DSC_TYPE_A, true) != 0 ||
            dsc_query_add(d, rr->target, DSC_TYPE_AAAA, true) != 0)
            return;                     /* d->error is set: the round fails */
    }
}

/* A query's end; may end the round. q is not valid afterwards (more
 * queries may have moved the array). */
static void
dsc_query_done(struct dsc_dns *d, struct dsc_query *q, const char *error)
{
    int rcode = q->msg.rcode;
    bool is_first = q == d->queries;
    char rname[LB_DNS_TEXT_MAX];

    dsc_tcp_free(q);
    q->is_done = true;
    d->ndone++;
    d->ninflight--;
    if (error != NULL && d->error[0] == '\0')
        snprintf(d->error, sizeof(d->error), "%s", error);
    /* NXDOMAIN for a target: it has no address (the others still count) */
    if (error == NULL && rcode != 0 && !(rcode == 3 && q->is_target) && d->error[0] == '\0')
        snprintf(d->error, sizeof(d->error), "%s %s: %s", dsc_type_name(q->type), q->name,
                 lb_dns_rcode_text(rcode, rname, sizeof(rname)));
    if (d->error[0] == '\0' && is_first && d->is_srv)
        dsc_srv_targets(d);
    if (d->error[0] != '\0' || d->ndone == d->nqueries) {
        dsc_round_end(d);
        return;
    }
    dsc_send_more(d);
}

static void
dsc_on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct dsc_dns *d = arg;
    uint64_t now = lb_mono_ms();

    if (now >= d->deadline_ms) {
        for (size_t i = 0; i < d->nqueries; i++) {
            if (!d->queries[i].is_done) {
                snprintf(d->error, sizeof(d->error), "%s %s: no answer within %llu ms",
                         dsc_type_name(d->queries[i].type), d->queries[i].name,
                         (unsigned long long)d->budget_ms);
                break;
            }
        }
        dsc_round_end(d);
        return;
    }
    for (size_t i = 0; i < d->next_send; i++) {
        struct dsc_query *q = &d->queries[i];

        if (!q->is_done && q->tcp == NULL && now - q->sent_ms >= DSC_RESEND_MS)
            dsc_query_send(d, q);
    }
}

static int
dsc_server_cmp(const void *a, const void *b)
{
    return strcmp(((const struct dsc_server *)a)->name, ((const struct dsc_server *)b)->name);
}

static void
dsc_address_text(const struct dsc_rr *rr, uint16_t port, char *out, size_t len)
{
    char ip[INET6_ADDRSTRLEN];

    inet_ntop(rr->type == DSC_TYPE_A ? AF_INET : AF_INET6, rr->addr, ip, sizeof(ip));
    snprintf(out, len, rr->type == DSC_TYPE_A ? "%s:%u" : "[%s]:%u", ip, port);
}

/* Whether rr is an address of target: the additional section of the SRV
 * answer names it, and the answer of a query for target gives it (its
 * owner may be the end of a CNAME chain). */
static bool
dsc_is_address_of(const struct dsc_query *q, const struct dsc_rr *rr, const char *target)
{
    if (rr->type == DSC_TYPE_SRV)
        return false;
    if (q->type == DSC_TYPE_SRV)
        return rr->section == 3 && strcmp(rr->owner, target) == 0;
    return rr->section == 1 && strcmp(q->name, target) == 0;
}

/* Appends one server per address of target, skipping an address already
 * in the set. is_named: the servers are named after target. */
static int
dsc_add_target(struct dsc_dns *d, struct dsc_server **set, size_t *n, size_t *cap,
               const char *target, uint16_t port, uint32_t weight, bool is_named)
{
    size_t naddr = 0;

    for (int pass = 0; pass < 2; pass++) {
        for (size_t qi = 0; qi < d->nqueries; qi++) {
            const struct dsc_query *q = &d->queries[qi];

            for (size_t i = 0; i < q->msg.nrrs; i++) {
                const struct dsc_rr *rr = &q->msg.rrs[i];
                struct dsc_server s = { .weight = weight };
                bool is_dup = false;

                if (!dsc_is_address_of(q, rr, target))
                    continue;
                if (pass == 0) {        /* count first: the name says if several */
                    naddr++;
                    continue;
                }
                dsc_address_text(rr, port, s.address, sizeof(s.address));
                for (size_t k = 0; k < *n && !is_dup; k++)
                    is_dup = strcmp((*set)[k].address, s.address) == 0;
                if (is_dup)
                    continue;
                if (!is_named ||
                    snprintf(s.name, sizeof(s.name), naddr == 1 ? "%s:%u" : "%s:%u@%s", target,
                             port, s.address) >= (int)sizeof(s.name))
                    snprintf(s.name, sizeof(s.name), "%s", s.address);
                if (*n == *cap) {
                    size_t c = *cap != 0 ? 2 * *cap : 16;
                    struct dsc_server *p = realloc(*set, c * sizeof(*p));

                    if (p == NULL)
                        return -1;
                    *set = p;
                    *cap = c;
                }
                (*set)[(*n)++] = s;
            }
        }
    }
    return 0;
}

static void
dsc_round_report(struct dsc_dns *d)
{
    struct dsc_server *set = NULL;
    size_t n = 0, cap = 0;
    const struct dsc_msg *first = &d->queries[0].msg;
    int rc = 0;

    if (d->error[0] != '\0') {
        d->fn(d->arg, NULL, 0, d->error);
        return;
    }
    if (!d->is_srv) {
        rc = dsc_add_target(d, &set, &n, &cap, d->spec->name, d->spec->port, 1, false);
    } else {
        uint32_t lowest = UINT32_MAX;

        for (size_t i = 0; i < first->nrrs; i++) {
            if (first->rrs[i].type == DSC_TYPE_SRV && first->rrs[i].section == 1 &&
                first->rrs[i].priority < lowest)
                lowest = first->rrs[i].priority;
        }
        for (size_t i = 0; i < first->nrrs && rc == 0; i++) {
            const struct dsc_rr *rr = &first->rrs[i];

            if (rr->type == DSC_TYPE_SRV && rr->section == 1 && rr->priority == lowest)
                rc = dsc_add_target(d, &set, &n, &cap, rr->target, rr->port,
                                    rr->weight != 0 ? rr->weight : 1, true);
        }
    }
    if (rc != 0)
        d->fn(d->arg, NULL, 0, "out of memory");
    else if (n == 0)
        d->fn(d->arg, NULL, 0, "empty answer");
    else {
        qsort(set, n, sizeof(*set), dsc_server_cmp);
        d->fn(d->arg, set, n, NULL);
    }
    free(set);
}

static void
dsc_round_clear(struct dsc_dns *d)
{
    for (size_t i = 0; i < d->nqueries; i++) {
        dsc_tcp_free(&d->queries[i]);
        dsc_msg_fini(&d->queries[i].msg);
    }
    d->nqueries = d->next_send = d->ndone = d->ninflight = 0;
    if (d->udp_ev != NULL)
        event_free(d->udp_ev);
    d->udp_ev = NULL;
    if (d->udp_fd >= 0)
        close(d->udp_fd);
    d->udp_fd = -1;
    if (d->tick_ev != NULL)
        event_del(d->tick_ev);
    d->is_running = false;
}

static void
dsc_round_end(struct dsc_dns *d)
{
    if (!d->is_running)
        return;
    dsc_round_report(d);
    dsc_round_clear(d);
}

static void
dsc_round_start(struct dsc_dns *d)
{
    struct timeval tick = lb_tv_ms(DSC_TICK_MS);

    d->error[0] = '\0';
    d->is_running = true;
    d->budget_ms = d->spec->interval_ms < DSC_ROUND_MAX_MS ? d->spec->interval_ms : DSC_ROUND_MAX_MS;
    d->deadline_ms = lb_mono_ms() + d->budget_ms;
    d->id_base = (uint16_t)(lb_mono_ms() * 2654435761u ^ (uintptr_t)d);
    d->udp_fd = socket(d->spec->endpoint.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (d->udp_fd < 0 ||
        connect(d->udp_fd, (struct sockaddr *)&d->spec->endpoint, d->spec->endpoint_len) != 0 ||
        (d->udp_ev = event_new(d->base, d->udp_fd, EV_READ | EV_PERSIST, dsc_on_udp, d)) ==
            NULL ||
        event_add(d->udp_ev, NULL) != 0 || event_add(d->tick_ev, &tick) != 0) {
        snprintf(d->error, sizeof(d->error), "socket: %s", strerror(errno));
        dsc_round_end(d);
        return;
    }
    if (dsc_query_add(d, d->spec->name, d->is_srv ? DSC_TYPE_SRV : DSC_TYPE_A,
                      false) != 0 ||
        (!d->is_srv &&
         dsc_query_add(d, d->spec->name, DSC_TYPE_AAAA, true) != 0)) {
        dsc_round_end(d);
        return;
    }
    dsc_send_more(d);
}

static void
dsc_on_interval(evutil_socket_t fd, short what, void *arg)
{
    struct dsc_dns *d = arg;

    if (!d->is_running)
        dsc_round_start(d);             /* one round at a time */
}

/* ---------------------------------------------------------------- life */

/* The source's new: spec is the struct dsc's own copy, which lives as long
 * as the state, written here to the form the answers' names have (lower
 * case, no final dot). Nothing runs until dsc_dns_start. */
static void *
dsc_dns_new(struct event_base *base, struct dsc_spec *spec, dsc_result_pt fn, void *arg)
{
    struct dsc_dns *d = calloc(1, sizeof(*d));
    size_t n;

    if (d == NULL)
        return NULL;
    for (char *c = spec->name; *c != '\0'; c++)
        *c = (char)tolower((unsigned char)*c);
    n = strlen(spec->name);
    if (n > 0 && spec->name[n - 1] == '.')
        spec->name[n - 1] = '\0';
    d->base = base;
    d->spec = spec;
    d->is_srv = spec->source == &dsc_dns_srv;
    d->fn = fn;
    d->arg = arg;
    d->udp_fd = -1;
    d->interval_ev = event_new(base, -1, EV_PERSIST, dsc_on_interval, d);
    d->tick_ev = event_new(base, -1, EV_PERSIST, dsc_on_tick, d);
    if (d->interval_ev == NULL || d->tick_ev == NULL) {
        dsc_dns_free(d);
        return NULL;
    }
    return d;
}

/* The first round at once, from the loop (the caller may hold a lock its
 * callback takes), then one every interval. An activation, not a timer
 * of 0 ms: it goes with interval_ev when the discovery is freed first. */
static int
dsc_dns_start(void *state)
{
    struct dsc_dns *d = state;
    struct timeval every = lb_tv_ms(d->spec->interval_ms);

    if (event_add(d->interval_ev, &every) != 0)
        return -1;
    event_active(d->interval_ev, 0, 0);
    return 0;
}

static void
dsc_dns_free(void *state)
{
    struct dsc_dns *d = state;

    if (d == NULL)
        return;
    dsc_round_clear(d);
    free(d->queries);
    if (d->interval_ev != NULL)
        event_free(d->interval_ev);
    if (d->tick_ev != NULL)
        event_free(d->tick_ev);
    free(d);
}

/* One name in two spellings: DNS names are case-insensitive, and a final
 * dot (the root) changes nothing. */
static bool
dsc_dns_name_equal(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);

    na -= na > 0 && a[na - 1] == '.';
    nb -= nb > 0 && b[nb - 1] == '.';
    return na == nb && strncasecmp(a, b, na) == 0;
}

/* A reload keeps a running discovery whose spec this calls equal: same
 * name, port, interval and DNS server (the source is compared by
 * dsc_spec_equal). */
static bool
dsc_dns_spec_equal(const struct dsc_spec *a, const struct dsc_spec *b)
{
    return dsc_dns_name_equal(a->name, b->name) && a->port == b->port &&
           a->interval_ms == b->interval_ms && a->endpoint_len == b->endpoint_len &&
           memcmp(&a->endpoint, &b->endpoint, a->endpoint_len) == 0;
}

const struct dsc_source dsc_dns_srv = {
    .name = "dns-srv",
    .new = dsc_dns_new,
    .free = dsc_dns_free,
    .spec_equal = dsc_dns_spec_equal,
    .start = dsc_dns_start,
};

const struct dsc_source dsc_dns_a = {
    .name = "dns-a",
    .new = dsc_dns_new,
    .free = dsc_dns_free,
    .spec_equal = dsc_dns_spec_equal,
    .start = dsc_dns_start,
};

int
dsc_resolver_from_file(const char *path, struct sockaddr_storage *ss, socklen_t *len, char *err,
                       size_t errlen)
{
    FILE *f = fopen(path, "r");
    char line[512], ip[INET6_ADDRSTRLEN + 1];

    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;

        if (sscanf(line, " nameserver %46s", ip) != 1)
            continue;
        memset(ss, 0, sizeof(*ss));
        if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
            v4->sin_family = AF_INET;
            v4->sin_port = htons(53);
            *len = sizeof(*v4);
        } else if (inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1) {
            v6->sin6_family = AF_INET6;
            v6->sin6_port = htons(53);
            *len = sizeof(*v6);
        } else {
            continue;                   /* fe80::1%eth0 and the like */
        }
        fclose(f);
        return 0;
    }
    fclose(f);
    snprintf(err, errlen, "%s has no nameserver", path);
    return -1;
}
