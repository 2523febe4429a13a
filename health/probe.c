/*
 * probe.c - one non-blocking probe: TCP connect, then for HTTP(S) an
 * optional TLS handshake, the request, and the status line; for mysql,
 * pgsql and redis a conversation (talk.h) that says what to send and read.
 *
 *   CONNECTING --tcp--> done (pass)
 *       |
 *       +--https--> TLS_HANDSHAKE --+
 *       +--http---------------------+--> SENDING --> READING --> done
 *       +--mysql, pgsql, redis--> SENDING <--> READING --> done
 *
 * Any failure or the timeout (connect + request + status line together)
 * ends the probe with a failed result whose detail says where it stopped.
 *
 * check_reuse: after the status line's verdict the probe reads the rest of
 * the answer (DRAINING); when the answer leaves the connection reusable
 * (http_head.c) the connection is kept on the target for the next probe,
 * which starts at SENDING. A kept connection the server closed meanwhile
 * shows as a failed send or an EOF or reset before the first byte of the
 * answer: the probe then connects afresh, once, within its timeout.
 * A probe never blocks its thread: every wait is an event on the thread's
 * base, so a hung server costs one socket and one timer until the timeout.
 *
 * agent (a server's agent_port): the connect, agent_send if set, then one
 * line read (agent.h), until the line's end or the agent's close; the
 * probe passes when the line parses, its reply in the result:
 *
 *   CONNECTING --> SENDING (agent_send) --> READING --> done
 *
 * dns, udp: no connection, but a connected UDP socket per probe, fresh
 * (a new source port each time), the datagram of dgram.c sent at once,
 * then every datagram read until one decides or the timeout comes; an
 * ICMP port unreachable (ECONNREFUSED on the connected socket) fails at
 * once:
 *
 *   SENDING --> READING --(a datagram that is not the answer)--> READING
 *                  +--(the answer, udp: any datagram)--> done
 *
 * check_send_proxy: a PROXY header (v1 UNKNOWN or v2 LOCAL, built once on
 * the target) opens every new connection, a kept one having had it at its
 * start. When the check speaks first (HTTP, pgsql, redis) it goes in the
 * same sendmsg as the first bytes, so one segment carries both; before a
 * TLS handshake, a tcp check's verdict or a server that speaks first
 * (mysql), it goes alone, ahead of what follows in the stream.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "core.h"
#include "dgram.h"
#include "grpc.h"
#include "hc_int.h"
#include "talk.h"

/* The longest status line read, its line end included: longer is
 * malformed (an endless line must not make the prober buffer without
 * bound). */
#define HC_STATUS_LINE_MAX 255

enum hc_probe_state {
    HC_PROBE_CONNECTING = 0,
    HC_PROBE_TLS_HANDSHAKE,
    HC_PROBE_SENDING,
    HC_PROBE_READING,
    HC_PROBE_DRAINING,              /* check_reuse: the rest of the answer */
};

static const char *const hc_probe_waiting_for[] = {
    [HC_PROBE_CONNECTING] = "connect",
    [HC_PROBE_TLS_HANDSHAKE] = "the TLS handshake",
    [HC_PROBE_SENDING] = "sending the request",
    [HC_PROBE_READING] = "the status line",
    [HC_PROBE_DRAINING] = "the rest of the answer",
};

/* Allocated at start, freed in hc_probe_done; health thread only. */
struct hc_probe {
    struct hc_target *tg;
    enum hc_probe_state state;
    int fd;
    SSL *ssl;
    struct event io;
    struct event timeout;
    size_t sent;
    size_t proxy_sent;              /* of tg->proxy, on this connection */
    size_t len;
    char line[HC_STATUS_LINE_MAX];
    bool is_reused;                 /* on a kept connection */
    bool has_verdict;               /* DRAINING: the status line decided */
    bool passed;
    bool is_warning;                /* the status is in check_warn */
    char detail[HC_DETAIL_MAX];
    struct hc_head head;
    bool is_head_done;
    struct hc_talk *talk;           /* mysql, pgsql, redis; else NULL */
    struct hc_dgram *dgram;         /* dns, udp; else NULL */
    struct hc_grpc *grpc;           /* grpc; else NULL */
    struct hc_probe_agent {         /* an agent's; else NULL */
        struct hc_agent_reader reader;
        struct hc_agent_reply reply;
    } *agent;
    uint64_t body_left;
    uint64_t seq;
    uint64_t started_ms;
    uint64_t planned_ms;            /* the slot it started for (started - lag) */
    double started_at;
    double lag_ms;
    struct timespec started_ts;
};

static void hc_probe_on_io(evutil_socket_t fd, short what, void *arg);
static void hc_probe_step(struct hc_probe *p);
static void hc_probe_connect(struct hc_probe *p);
static void hc_probe_dgram_start(struct hc_probe *p);

static double
hc_probe_elapsed_ms(const struct hc_probe *p)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - p->started_ts.tv_sec) * 1e3 +
           (double)(now.tv_nsec - p->started_ts.tv_nsec) / 1e6;
}

static void
hc_probe_free(struct hc_probe *p)
{
    event_del(&p->io);
    event_del(&p->timeout);
    if (p->ssl != NULL)
        SSL_free(p->ssl);
    if (p->fd >= 0)
        close(p->fd);
    p->tg->probe = NULL;
    free(p->talk);
    free(p->dgram);
    hc_grpc_free(p->grpc);
    free(p->agent);
    free(p);
}

/* The single exit of a probe: queue its result and free it. */
static void
hc_probe_done(struct hc_probe *p, bool passed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
hc_probe_done(struct hc_probe *p, bool passed, const char *fmt, ...)
{
    struct hc_result r = {
        .id = p->tg->spec.id,
        .seq = p->seq,
        .passed = passed,
        .is_warning = passed && p->is_warning,
        .duration_ms = hc_probe_elapsed_ms(p),
        .lag_ms = p->lag_ms,
        .started_mono_ms = p->started_ms,
        .started_at = p->started_at,
    };
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r.detail, sizeof(r.detail), fmt, ap);
    va_end(ap);
    if (passed && p->agent != NULL)
        r.agent = p->agent->reply;
    hc_result_push(p->tg->thread, &r);
    hc_probe_free(p);
}

/* strerror in the lower case operators read in logs ("connection refused"). */
static const char *
hc_probe_strerror(int err, char *buf, size_t len)
{
    snprintf(buf, len, "%s", strerror(err));
    buf[0] = (char)tolower((unsigned char)buf[0]);
    return buf;
}

/* OpenSSL keeps errors in a per-thread queue: drain it into the detail so
 * the next probe on this thread does not inherit them. */
static const char *
hc_probe_ssl_error(struct hc_probe *p, char *buf, size_t len)
{
    unsigned long e, first = 0;
    long vr = SSL_get_verify_result(p->ssl);

    while ((e = ERR_get_error()) != 0) {
        if (first == 0)
            first = e;
    }
    if (vr != X509_V_OK && p->tg->spec.verify)
        snprintf(buf, len, "certificate verify failed: %s",
                 X509_verify_cert_error_string(vr));
    else if (first != 0 && ERR_reason_error_string(first) != NULL)
        snprintf(buf, len, "%s", ERR_reason_error_string(first));   /* "wrong version number" */
    else if (first != 0)
        ERR_error_string_n(first, buf, len);
    else
        snprintf(buf, len, "%s", errno ? strerror(errno) : "connection closed");
    return buf;
}

void
hc_probe_unkeep(struct hc_target *tg)
{
    if (tg->kept_ssl != NULL)
        SSL_free(tg->kept_ssl);
    if (tg->kept_fd >= 0)
        close(tg->kept_fd);
    tg->kept_ssl = NULL;
    tg->kept_fd = -1;
}

/* The answer was read to its end and leaves the connection reusable: the
 * target keeps it, and the verdict goes out. */
static void
hc_probe_keep(struct hc_probe *p)
{
    struct hc_target *tg = p->tg;

    tg->kept_fd = p->fd;
    tg->kept_ssl = p->ssl;
    p->fd = -1;
    p->ssl = NULL;
    hc_probe_done(p, p->passed, "%s", p->detail);
}

/* A kept connection the server had closed: connect afresh, once. */
static void
hc_probe_reconnect(struct hc_probe *p)
{
    event_del(&p->io);
    if (p->ssl != NULL)
        SSL_free(p->ssl);
    close(p->fd);
    p->ssl = NULL;
    p->fd = -1;
    p->is_reused = false;
    p->sent = p->len = 0;
    p->state = HC_PROBE_CONNECTING;
    hc_probe_connect(p);
}

/* A read or write on a kept connection failed before any byte of the
 * answer came: the server closed it between probes, not a verdict. */
static bool
hc_probe_is_stale(const struct hc_probe *p)
{
    return p->is_reused && (p->state == HC_PROBE_SENDING ||
                            (p->state == HC_PROBE_READING && p->len == 0));
}

static void
hc_probe_time_out(struct hc_probe *p)
{
    char detail[HC_DETAIL_MAX];

    if (p->dgram != NULL) {
        hc_dgram_timeout(p->dgram, p->tg->spec.timeout_ms, detail, sizeof(detail));
        hc_probe_done(p, false, "%s", detail);
        return;
    }
    if (p->has_verdict) {               /* only the rest of the answer is late */
        hc_probe_done(p, p->passed, "%s", p->detail);
        return;
    }
    hc_probe_done(p, false, "timeout after %llu ms waiting for %s",
                  (unsigned long long)p->tg->spec.timeout_ms,
                  p->proxy_sent > 0 && p->proxy_sent < p->tg->proxy_len
                      ? "sending the PROXY header"
                  : p->talk != NULL && p->state == HC_PROBE_READING
                      ? hc_talk_waiting_for(p->talk)
                  : p->grpc != NULL ? hc_grpc_waiting_for(p->grpc)
                  : p->agent != NULL && p->state == HC_PROBE_SENDING ? "sending agent_send"
                  : p->agent != NULL ? "the agent's reply"
                  : hc_probe_waiting_for[p->state]);
}

static void
hc_probe_on_timeout(evutil_socket_t fd, short what, void *arg)
{
    hc_probe_time_out(arg);
}

bool
hc_probe_end_if_due(struct hc_probe *p, uint64_t now)
{
    if (now + HC_TIMER_EARLY_MS < p->planned_ms + p->tg->spec.timeout_ms)
        return false;
    hc_probe_time_out(p);
    return true;
}

void
hc_probe_start(struct hc_target *tg, double lag_ms)
{
    const struct hc_spec *sp = &tg->spec;
    struct hc_probe *p = calloc(1, sizeof(*p));
    struct event_base *base = tg->thread->base;
    struct timeval tv;
    struct timespec wall;

    if (p == NULL)
        return;     /* out of memory: this slot is lost, the next one tries */
    p->tg = tg;
    p->fd = -1;
    p->seq = ++tg->seq;
    p->lag_ms = lag_ms;
    clock_gettime(CLOCK_MONOTONIC, &p->started_ts);
    clock_gettime(CLOCK_REALTIME, &wall);
    p->started_ms = (uint64_t)p->started_ts.tv_sec * 1000 +
                    (uint64_t)p->started_ts.tv_nsec / 1000000;
    p->planned_ms = p->started_ms - (uint64_t)lag_ms;
    p->started_at = (double)wall.tv_sec + (double)wall.tv_nsec / 1e9;
    tg->probe = p;
    event_assign(&p->io, base, -1, 0, hc_probe_on_io, p);
    evtimer_assign(&p->timeout, base, hc_probe_on_timeout, p);
    tv = lb_tv_ms(sp->timeout_ms);
    if (evtimer_add(&p->timeout, &tv) == -1) {
        hc_probe_done(p, false, "internal error: event_add failed");
        return;
    }
    if (sp->kind == CONF_CHECK_DNS || sp->kind == CONF_CHECK_UDP) {
        hc_probe_dgram_start(p);
        return;
    }
    if (tg->kept_fd >= 0) {
        p->fd = tg->kept_fd;
        p->ssl = tg->kept_ssl;
        tg->kept_fd = -1;
        tg->kept_ssl = NULL;
        p->is_reused = true;
        p->proxy_sent = tg->proxy_len;  /* sent when it was new */
        p->state = HC_PROBE_SENDING;
        event_assign(&p->io, base, p->fd, EV_READ | EV_WRITE | EV_ET | EV_PERSIST,
                     hc_probe_on_io, p);
        if (event_add(&p->io, NULL) == -1) {
            hc_probe_done(p, false, "internal error: event_add failed");
            return;
        }
        hc_probe_step(p);
        return;
    }
    hc_probe_connect(p);
}

static void
hc_probe_connect(struct hc_probe *p)
{
    const struct hc_spec *sp = &p->tg->spec;
    char ebuf[96];

    p->proxy_sent = 0;              /* a new connection: the header first */
    p->fd = socket(sp->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->fd < 0) {
        hc_probe_done(p, false, "socket: %s", hc_probe_strerror(errno, ebuf, sizeof(ebuf)));
        return;
    }
    /* One registration for the probe's life, edge-triggered for reading
     * and writing: each step runs until the socket says EAGAIN (or OpenSSL
     * wants more), and the next edge moves it on. Re-arming read or write
     * per step cost 4 epoll_ctl a probe; this costs 2. */
    event_assign(&p->io, p->tg->thread->base, p->fd, EV_READ | EV_WRITE | EV_ET | EV_PERSIST,
                 hc_probe_on_io, p);
    if (event_add(&p->io, NULL) == -1) {
        hc_probe_done(p, false, "internal error: event_add failed");
        return;
    }
    if (connect(p->fd, (const struct sockaddr *)&sp->addr, sp->addr_len) == 0) {
        hc_probe_step(p);
        return;
    }
    if (errno != EINPROGRESS)
        hc_probe_done(p, false, "connect: %s", hc_probe_strerror(errno, ebuf, sizeof(ebuf)));
}

void
hc_probe_cancel(struct hc_probe *p)
{
    hc_probe_free(p);
}

static void
hc_probe_on_io(evutil_socket_t fd, short what, void *arg)
{
    struct hc_probe *p = arg;
    char ebuf[96];
    int err = 0;
    socklen_t len = sizeof(err);

    if (p->state == HC_PROBE_CONNECTING) {
        /* The outcome of a non-blocking connect is in SO_ERROR once the
         * socket turns writable. */
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
            err = errno;
        if (err != 0) {
            hc_probe_done(p, false, "connect: %s", hc_probe_strerror(err, ebuf, sizeof(ebuf)));
            return;
        }
        if (!(what & EV_WRITE))
            return;                     /* not connected yet */
    }
    hc_probe_step(p);
}

/* send(2) of buf on the plain socket, behind what is left of the PROXY
 * header in one sendmsg: header and first bytes in one segment. Returns
 * the bytes of buf sent (0 when only header bytes went), or -1 with
 * errno. */
static ssize_t
hc_probe_send(struct hc_probe *p, const void *buf, size_t len)
{
    struct hc_target *tg = p->tg;
    size_t left = tg->proxy_len - p->proxy_sent;
    struct iovec iov[2] = {
        { .iov_base = tg->proxy + p->proxy_sent, .iov_len = left },
        { .iov_base = (void *)buf, .iov_len = len },
    };
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len > 0 ? 2 : 1 };
    ssize_t n;

    if (left == 0)
        return send(p->fd, buf, len, MSG_NOSIGNAL);
    n = sendmsg(p->fd, &msg, MSG_NOSIGNAL);
    if (n < 0)
        return -1;
    if ((size_t)n <= left) {
        p->proxy_sent += (size_t)n;
        return 0;
    }
    p->proxy_sent = tg->proxy_len;
    return n - (ssize_t)left;
}

/* Sends what is left of the PROXY header on its own, where the next bytes
 * are not the prober's to write now (OpenSSL's ClientHello, a server that
 * speaks first, a tcp check's close). 0 when all of it is out, 1 to wait
 * for the socket's next edge, -1 when the probe ended. */
static int
hc_probe_send_proxy(struct hc_probe *p)
{
    char ebuf[96];

    while (p->proxy_sent < p->tg->proxy_len) {
        if (hc_probe_send(p, NULL, 0) < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return 1;
            hc_probe_done(p, false, "send of the PROXY header: %s",
                          hc_probe_strerror(errno, ebuf, sizeof(ebuf)));
            return -1;
        }
    }
    return 0;
}

/* Sets up TLS on the connected socket. -1 when it cannot (then done). */
static int
hc_probe_tls_begin(struct hc_probe *p)
{
    struct hc_target *tg = p->tg;
    char ebuf[160];

    p->ssl = SSL_new(tg->ssl_ctx);
    if (p->ssl == NULL || SSL_set_fd(p->ssl, p->fd) != 1) {
        hc_probe_done(p, false, "TLS setup failed: %s", hc_probe_ssl_error(p, ebuf, sizeof(ebuf)));
        return -1;
    }
    if (tg->sni[0] != '\0')
        SSL_set_tlsext_host_name(p->ssl, tg->sni);
    if (tg->spec.verify && tg->sni[0] != '\0')
        SSL_set1_host(p->ssl, tg->sni);     /* the name must match, too */
    if (tg->spec.kind == CONF_CHECK_GRPC)
        SSL_set_alpn_protos(p->ssl, (const unsigned char *)"\x02h2", 3);
    SSL_set_connect_state(p->ssl);
    return 0;
}

/* TLS I/O result -> wait (for the socket's next edge), or fail. Returns 1
 * to wait, -1 when done. */
static int
hc_probe_tls_want(struct hc_probe *p, int rc, const char *what)
{
    char ebuf[160];

    switch (SSL_get_error(p->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return 1;
    default:
        break;
    }
    if (hc_probe_is_stale(p)) {
        ERR_clear_error();
        hc_probe_reconnect(p);
        return -1;
    }
    if (p->has_verdict) {               /* the rest of the answer failed */
        ERR_clear_error();
        hc_probe_done(p, p->passed, "%s", p->detail);
        return -1;
    }
    switch (SSL_get_error(p->ssl, rc)) {
    case SSL_ERROR_ZERO_RETURN:
        hc_probe_done(p, false, "%s: connection closed", what);
        return -1;
    default:
        hc_probe_done(p, false, "%s: %s", what, hc_probe_ssl_error(p, ebuf, sizeof(ebuf)));
        return -1;
    }
}

/* One read of the answer, plain or TLS: > 0 bytes, 0 at EOF, -1 when the
 * socket has nothing now (wait for its next edge) or the probe ended or
 * moved on (hc_probe_tls_want, a reconnect): either way the caller returns.
 * what names the step for the failure's detail. */
static ssize_t
hc_probe_recv(struct hc_probe *p, char *buf, size_t room)
{
    char ebuf[96];
    ssize_t n;

    if (p->ssl != NULL) {
        ERR_clear_error();
        n = SSL_read(p->ssl, buf, (int)room);
        if (n <= 0 && SSL_get_error(p->ssl, (int)n) != SSL_ERROR_ZERO_RETURN) {
            hc_probe_tls_want(p, (int)n, "TLS read");
            return -1;
        }
        return n > 0 ? n : 0;
    }
    n = recv(p->fd, buf, room, 0);
    if (n >= 0)
        return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return -1;                      /* the next edge */
    if (hc_probe_is_stale(p))
        hc_probe_reconnect(p);
    else if (p->has_verdict)
        hc_probe_done(p, p->passed, "%s", p->detail);
    else
        hc_probe_done(p, false, "recv: %s", hc_probe_strerror(errno, ebuf, sizeof(ebuf)));
    return -1;
}

/* check_reuse, after the verdict: reads the rest of the answer (its head,
 * then Content-Length bytes of body, never past it) and keeps the
 * connection when all of it came and it is reusable. Any doubt closes it;
 * the verdict stands either way. */
static void
hc_probe_drain(struct hc_probe *p, const char *have, size_t nhave)
{
    ssize_t n;
    size_t used;
    int rc;

    for (;;) {
        if (!p->is_head_done && nhave > 0) {
            rc = hc_head_feed(&p->head, have, nhave, &used);
            if (rc == -1)
                break;
            if (rc == 1) {
                p->is_head_done = true;
                p->body_left = (uint64_t)p->head.content_length;
                have += used;
                nhave -= used;
            } else {
                nhave = 0;
            }
        }
        if (p->is_head_done) {
            if (nhave > p->body_left)
                break;                  /* bytes past the answer */
            p->body_left -= nhave;
            if (p->body_left == 0) {
                hc_probe_keep(p);
                return;
            }
        }
        n = hc_probe_recv(p, p->line, p->is_head_done && p->body_left < sizeof(p->line)
                                          ? (size_t)p->body_left : sizeof(p->line));
        if (n < 0)
            return;
        if (n == 0)
            break;                      /* closed after the answer */
        have = p->line;
        nhave = (size_t)n;
    }
    hc_probe_done(p, p->passed, "%s", p->detail);
}

/* The status line decided: done, or with check_reuse on a passing HTTP/1.1
 * answer, read the rest of it first. A failed check never keeps its
 * connection: the next probe connects afresh, and so also tests that the
 * server still accepts. */
static void
hc_probe_verdict(struct hc_probe *p, bool passed, const char *detail)
{
    const char *eol = memchr(p->line, '\n', p->len);
    size_t after;

    if (!p->tg->spec.reuse || !passed || eol == NULL ||
        strncmp(p->line, "HTTP/1.1 ", 9) != 0) {
        hc_probe_done(p, passed, "%s", detail);
        return;
    }
    p->has_verdict = true;
    p->passed = passed;
    snprintf(p->detail, sizeof(p->detail), "%s", detail);
    p->state = HC_PROBE_DRAINING;
    hc_head_init(&p->head);
    after = (size_t)(eol + 1 - p->line);
    /* The bytes after the status line are the head's first; moved to the
     * front, since the buffer is the drain's scratch from now on. */
    memmove(p->line, eol + 1, p->len - after);
    p->len -= after;
    hc_probe_drain(p, p->line, p->len);
}

/* Reads until the answer so far decides the check or the socket has
 * nothing more. The loop matters for TLS: a record may hold more than one
 * read's worth, and OpenSSL's buffer would not wake the fd again. */
static void
hc_probe_read_status(struct hc_probe *p)
{
    char detail[HC_DETAIL_MAX];
    bool passed;
    ssize_t n;

    while (!hc_status_verdict(p->line, p->len, sizeof(p->line), &p->tg->spec.expect,
                              &p->tg->spec.warn, &passed, &p->is_warning, detail,
                              sizeof(detail))) {
        n = hc_probe_recv(p, p->line + p->len, sizeof(p->line) - p->len);
        if (n < 0)
            return;
        if (n == 0) {
            if (hc_probe_is_stale(p))
                hc_probe_reconnect(p);
            else
                hc_probe_done(p, false, "connection closed before the status line");
            return;
        }
        p->len += (size_t)n;
    }
    hc_probe_verdict(p, passed, detail);
}

static void hc_probe_talk_next(struct hc_probe *p, enum hc_talk_next next);

/* The conversation's verdict. Its goodbye (COM_QUIT, Terminate) is sent
 * if the socket takes it at once, and what the server sent beyond the
 * verdict is read off, so that the close is a FIN the server sees as a
 * client leaving, not a reset. */
static void
hc_probe_talk_end(struct hc_probe *p)
{
    char scrap[HC_TALK_IN_MAX];
    struct hc_talk *t = p->talk;

    if (t->out_len > 0)
        (void)send(p->fd, t->out, t->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)recv(p->fd, scrap, sizeof(scrap), MSG_DONTWAIT);
    hc_probe_done(p, t->passed, "%s", t->detail);
}

/* Sends buf[p->sent..len) on the plain socket. 0 when all of it is out,
 * 1 to wait for the socket's next edge, -1 when the probe ended. */
static int
hc_probe_send_rest(struct hc_probe *p, const void *buf, size_t len)
{
    char ebuf[96];
    ssize_t n;

    while (p->sent < len) {
        n = hc_probe_send(p, (const char *)buf + p->sent, len - p->sent);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return 1;
            hc_probe_done(p, false, "send: %s", hc_probe_strerror(errno, ebuf, sizeof(ebuf)));
            return -1;
        }
        p->sent += (size_t)n;
    }
    return 0;
}

static void
hc_probe_talk_send(struct hc_probe *p)
{
    struct hc_talk *t = p->talk;

    if (hc_probe_send_rest(p, t->out, t->out_len) != 0)
        return;
    t->out_len = 0;
    p->sent = 0;
    hc_probe_talk_next(p, t->in_len > 0 ? hc_talk_feed(t, NULL, 0) : HC_TALK_READ);
}

/* Reads until the conversation moves on or the socket has nothing more;
 * never more than the conversation has room for. */
static void
hc_probe_talk_read(struct hc_probe *p)
{
    char buf[HC_TALK_IN_MAX];
    enum hc_talk_next next;
    ssize_t n;

    if (hc_probe_send_proxy(p) != 0)
        return;                         /* the server waits for it */
    do {
        n = hc_probe_recv(p, buf, hc_talk_room(p->talk));
        if (n < 0)
            return;
        next = n == 0 ? hc_talk_closed(p->talk) : hc_talk_feed(p->talk, buf, (size_t)n);
    } while (next == HC_TALK_READ);
    hc_probe_talk_next(p, next);
}

static void
hc_probe_talk_next(struct hc_probe *p, enum hc_talk_next next)
{
    switch (next) {
    case HC_TALK_SEND:
        p->state = HC_PROBE_SENDING;
        hc_probe_talk_send(p);
        return;
    case HC_TALK_READ:
        p->state = HC_PROBE_READING;
        hc_probe_talk_read(p);
        return;
    case HC_TALK_DONE:
        hc_probe_talk_end(p);
        return;
    }
}

static void
hc_probe_talk_begin(struct hc_probe *p)
{
    const struct hc_spec *sp = &p->tg->spec;

    p->talk = malloc(sizeof(*p->talk));
    if (p->talk == NULL) {
        hc_probe_done(p, false, "internal error: out of memory");
        return;
    }
    hc_probe_talk_next(p, hc_talk_begin(p->talk, sp->kind, sp->user, sp->database, sp->role));
}

/* ----------------------------------------------------------------- grpc */

/* One write of buf, plain (behind the PROXY header) or TLS: the bytes
 * sent, or -1 when the socket is full (wait for its next edge) or the
 * probe ended: either way the caller returns. */
static ssize_t
hc_probe_write(struct hc_probe *p, const void *buf, size_t len)
{
    char ebuf[96];
    ssize_t n;
    int rc;

    if (p->ssl != NULL) {
        ERR_clear_error();
        rc = SSL_write(p->ssl, buf, (int)len);
        if (rc <= 0) {
            hc_probe_tls_want(p, rc, "TLS write");
            return -1;
        }
        return rc;
    }
    n = hc_probe_send(p, buf, len);
    if (n >= 0)
        return n;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        hc_probe_done(p, false, "send: %s", hc_probe_strerror(errno, ebuf, sizeof(ebuf)));
    return -1;
}

/* The verdict: a GOAWAY goes if the socket takes it at once, so that the
 * server sees a client leaving. */
static void
hc_probe_grpc_end(struct hc_probe *p, bool passed, const char *detail)
{
    const uint8_t *out;
    size_t len;

    hc_grpc_goodbye(p->grpc);
    len = hc_grpc_output(p->grpc, &out);
    if (len > 0 && p->ssl != NULL) {
        (void)SSL_write(p->ssl, out, (int)len);
        ERR_clear_error();
    } else if (len > 0) {
        (void)send(p->fd, out, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    hc_probe_done(p, passed, "%s", detail);
}

/* Sends what the conversation has to send, reads what the server sent,
 * until the verdict or the socket's next edge. */
static void
hc_probe_grpc_pump(struct hc_probe *p)
{
    uint8_t buf[4096];
    const uint8_t *out;
    const char *detail;
    bool passed;
    size_t len;
    ssize_t n;

    for (;;) {
        p->state = HC_PROBE_SENDING;
        while (!hc_grpc_verdict(p->grpc, &passed, &detail) &&
               (len = hc_grpc_output(p->grpc, &out)) > 0) {
            n = hc_probe_write(p, out, len);
            if (n < 0)
                return;
            hc_grpc_sent(p->grpc, (size_t)n);
        }
        if (hc_grpc_verdict(p->grpc, &passed, &detail)) {
            hc_probe_grpc_end(p, passed, detail);
            return;
        }
        p->state = HC_PROBE_READING;
        n = hc_probe_recv(p, (char *)buf, sizeof(buf));
        if (n < 0)
            return;
        if (n == 0)
            hc_grpc_closed(p->grpc);
        else
            hc_grpc_feed(p->grpc, buf, (size_t)n);
    }
}

/* After the connect (h2c) or the handshake (check_tls: h2 must have been
 * chosen by ALPN, gRPC's rule). */
static void
hc_probe_grpc_begin(struct hc_probe *p)
{
    const struct hc_spec *sp = &p->tg->spec;
    const unsigned char *alpn = NULL;
    unsigned alpn_len = 0;

    if (p->ssl != NULL) {
        SSL_get0_alpn_selected(p->ssl, &alpn, &alpn_len);
        if (alpn_len != 2 || memcmp(alpn, "h2", 2) != 0) {
            hc_probe_done(p, false, "TLS: the server did not choose h2 by ALPN");
            return;
        }
    }
    p->grpc = hc_grpc_new(sp->host, sp->grpc_service, p->ssl != NULL);
    if (p->grpc == NULL) {
        hc_probe_done(p, false, "internal error: out of memory");
        return;
    }
    hc_probe_grpc_pump(p);
}

/* ---------------------------------------------------------------- agent */

/* The line decided: a reply that parses passes, with the line as its
 * detail (printable bytes and tabs, a separator; others as '?'); anything
 * else fails, and the caller keeps the agent's last verdict. */
static void
hc_probe_agent_end(struct hc_probe *p, enum hc_agent_read st)
{
    struct hc_probe_agent *a = p->agent;
    char text[HC_AGENT_LINE_MAX + 1], err[HC_DETAIL_MAX];
    size_t n = a->reader.len < sizeof(text) - 1 ? a->reader.len : sizeof(text) - 1;

    if (st == HC_AGENT_READ_ERROR) {
        hc_probe_done(p, false, "%s", a->reader.error);
        return;
    }
    if (hc_agent_parse(a->reader.line, a->reader.len, &a->reply, err, sizeof(err)) == -1) {
        hc_probe_done(p, false, "%s", err);
        return;
    }
    for (size_t i = 0; i < n; i++)
        text[i] = isprint((unsigned char)a->reader.line[i]) || a->reader.line[i] == '\t'
                      ? a->reader.line[i] : '?';
    text[n] = '\0';
    hc_probe_done(p, true, "%s", text);
}

static void
hc_probe_agent_read(struct hc_probe *p)
{
    char buf[HC_AGENT_LINE_MAX + 2];
    enum hc_agent_read st;
    ssize_t n;

    p->state = HC_PROBE_READING;
    do {
        n = hc_probe_recv(p, buf, sizeof(buf));
        if (n < 0)
            return;
        st = n == 0 ? hc_agent_reader_eof(&p->agent->reader)
                    : hc_agent_reader_feed(&p->agent->reader, buf, (size_t)n);
    } while (st == HC_AGENT_READ_MORE);
    hc_probe_agent_end(p, st);
}

static void
hc_probe_agent_send(struct hc_probe *p)
{
    const struct hc_spec *sp = &p->tg->spec;

    if (hc_probe_send_rest(p, sp->send, sp->send_len) == 0)
        hc_probe_agent_read(p);
}

static void
hc_probe_agent_begin(struct hc_probe *p)
{
    p->agent = malloc(sizeof(*p->agent));
    if (p->agent == NULL) {
        hc_probe_done(p, false, "internal error: out of memory");
        return;
    }
    hc_agent_reader_init(&p->agent->reader);
    p->state = HC_PROBE_SENDING;
    hc_probe_agent_send(p);
}

/* Moves the probe on from its current state as far as the socket allows. */
static void
hc_probe_step(struct hc_probe *p)
{
    struct hc_target *tg = p->tg;
    char ebuf[96];
    ssize_t n;
    int rc;

    switch (p->state) {
    case HC_PROBE_CONNECTING:
        if (tg->spec.is_agent) {
            hc_probe_agent_begin(p);
            return;
        }
        /* Before a handshake or a close, which are not the prober's bytes;
         * a wait leaves the state as it is, and the next edge comes back
         * here. */
        if ((tg->spec.kind == CONF_CHECK_TCP || tg->spec.kind == CONF_CHECK_HTTPS ||
             tg->spec.kind == CONF_CHECK_GRPC) &&
            hc_probe_send_proxy(p) != 0)
            return;
        if (tg->spec.kind == CONF_CHECK_TCP) {
            hc_probe_done(p, true, "connected");
            return;
        }
        if (tg->spec.kind == CONF_CHECK_GRPC && !tg->spec.tls) {
            hc_probe_grpc_begin(p);
            return;
        }
        if (tg->spec.kind != CONF_CHECK_HTTP && tg->spec.kind != CONF_CHECK_HTTPS &&
            tg->spec.kind != CONF_CHECK_GRPC) {
            hc_probe_talk_begin(p);
            return;
        }
        if (tg->ssl_ctx != NULL) {
            if (hc_probe_tls_begin(p) == -1)
                return;
            p->state = HC_PROBE_TLS_HANDSHAKE;
        } else {
            p->state = HC_PROBE_SENDING;
        }
        hc_probe_step(p);
        return;

    case HC_PROBE_TLS_HANDSHAKE:
        ERR_clear_error();
        rc = SSL_do_handshake(p->ssl);
        if (rc != 1) {
            hc_probe_tls_want(p, rc, "TLS handshake failed");
            return;
        }
        if (tg->spec.kind == CONF_CHECK_GRPC) {
            hc_probe_grpc_begin(p);
            return;
        }
        p->state = HC_PROBE_SENDING;
        hc_probe_step(p);
        return;

    case HC_PROBE_SENDING:
        if (p->agent != NULL) {
            hc_probe_agent_send(p);
            return;
        }
        if (p->grpc != NULL) {
            hc_probe_grpc_pump(p);
            return;
        }
        if (p->talk != NULL) {
            hc_probe_talk_send(p);
            return;
        }
        while (p->sent < tg->request_len) {
            if (p->ssl != NULL) {
                ERR_clear_error();
                rc = SSL_write(p->ssl, tg->request + p->sent, (int)(tg->request_len - p->sent));
                if (rc <= 0) {
                    hc_probe_tls_want(p, rc, "TLS write");
                    return;
                }
                n = rc;
            } else {
                n = hc_probe_send(p, tg->request + p->sent, tg->request_len - p->sent);
                if (n < 0) {
                    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                        return;         /* the next edge */
                    if (hc_probe_is_stale(p))
                        hc_probe_reconnect(p);
                    else
                        hc_probe_done(p, false, "send: %s",
                                      hc_probe_strerror(errno, ebuf, sizeof(ebuf)));
                    return;
                }
            }
            p->sent += (size_t)n;
        }
        p->state = HC_PROBE_READING;
        hc_probe_read_status(p);
        return;

    case HC_PROBE_READING:
        if (p->agent != NULL)
            hc_probe_agent_read(p);
        else if (p->grpc != NULL)
            hc_probe_grpc_pump(p);
        else if (p->talk != NULL)
            hc_probe_talk_read(p);
        else
            hc_probe_read_status(p);
        return;

    case HC_PROBE_DRAINING:
        hc_probe_drain(p, NULL, 0);
        return;
    }
}

/* ---------------------------------------------------- datagrams: dns, udp */

/* A dns query's id, which no one off the path may guess (RFC 5452): from
 * the kernel's pool, which getrandom(2) reads without blocking once it is
 * seeded (at boot, long before lb starts); from the clock should that
 * ever fail. */
static uint16_t
hc_probe_dgram_id(void)
{
    struct timespec ts;
    uint16_t id;

    if (getrandom(&id, sizeof(id), GRND_NONBLOCK) == (ssize_t)sizeof(id))
        return id;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint16_t)(ts.tv_nsec ^ (ts.tv_nsec >> 16));
}

static void
hc_probe_dgram_error(struct hc_probe *p, const char *what, int err)
{
    char ebuf[96];

    /* Linux reports an ICMP port unreachable for a connected UDP socket
     * as ECONNREFUSED on its next call: nothing listens on that port. */
    if (err == ECONNREFUSED)
        hc_probe_done(p, false, "refused (ICMP port unreachable)");
    else
        hc_probe_done(p, false, "%s: %s", what, hc_probe_strerror(err, ebuf, sizeof(ebuf)));
}

/* Datagrams read in one wakeup: a server that sends what is not the answer
 * faster than it is read must not keep the health thread (its other
 * probes' timers, this one's timeout) waiting. */
#define HC_DGRAM_READS 64

/* Sends the datagram if not yet sent, then reads the datagrams that have
 * come until one decides: all of them, or HC_DGRAM_READS and then a new
 * turn of the loop (the registration is edge-triggered: no edge would come
 * for those left). */
static void
hc_probe_dgram_step(struct hc_probe *p)
{
    struct hc_dgram *d = p->dgram;
    uint8_t buf[HC_DGRAM_IN_MAX];
    char detail[HC_DETAIL_MAX];
    bool passed;
    ssize_t n;

    if (p->state == HC_PROBE_SENDING) {
        if (send(p->fd, d->out, d->out_len, MSG_NOSIGNAL) < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                hc_probe_dgram_error(p, "send", errno);
            return;                     /* or the next write edge */
        }
        p->state = HC_PROBE_READING;
    }
    for (int i = 0; i < HC_DGRAM_READS; i++) {
        /* MSG_TRUNC: the datagram's own length, for the detail, when it
         * is longer than what is read of it */
        n = recv(p->fd, buf, sizeof(buf), MSG_TRUNC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                hc_probe_dgram_error(p, "recv", errno);
            return;
        }
        if (hc_dgram_reply(d, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf), (size_t)n,
                           &passed, detail, sizeof(detail))) {
            hc_probe_done(p, passed, "%s", detail);
            return;
        }
    }
    event_active(&p->io, EV_READ, 0);
}

static void
hc_probe_on_dgram(evutil_socket_t fd, short what, void *arg)
{
    hc_probe_dgram_step(arg);
}

static void
hc_probe_dgram_start(struct hc_probe *p)
{
    const struct hc_spec *sp = &p->tg->spec;
    char ebuf[96];

    p->dgram = malloc(sizeof(*p->dgram));
    if (p->dgram == NULL) {
        hc_probe_done(p, false, "internal error: out of memory");
        return;
    }
    if (hc_dgram_begin(p->dgram, sp, hc_probe_dgram_id()) == -1) {
        hc_probe_done(p, false, "internal error: no query of check_dns_name");
        return;
    }
    /* A fresh socket per probe: a fresh source port, so a late answer to
     * an earlier probe (or those a stopped server queued) finds its port
     * closed. Connected: the kernel drops datagrams from any other
     * address, and tells an ICMP error. */
    p->fd = socket(sp->addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->fd < 0) {
        hc_probe_done(p, false, "socket: %s", hc_probe_strerror(errno, ebuf, sizeof(ebuf)));
        return;
    }
    if (connect(p->fd, (const struct sockaddr *)&sp->addr, sp->addr_len) == -1) {
        hc_probe_done(p, false, "connect: %s", hc_probe_strerror(errno, ebuf, sizeof(ebuf)));
        return;
    }
    /* One registration, edge-triggered as a TCP probe's: the write edge
     * only matters when the send found the socket full. */
    p->state = HC_PROBE_SENDING;
    event_assign(&p->io, p->tg->thread->base, p->fd, EV_READ | EV_WRITE | EV_ET | EV_PERSIST,
                 hc_probe_on_dgram, p);
    if (event_add(&p->io, NULL) == -1) {
        hc_probe_done(p, false, "internal error: event_add failed");
        return;
    }
    hc_probe_dgram_step(p);
}
