/*
 * core.h - what every part of lb builds on, and nothing about the daemon:
 * the clocks, the event log, socket helpers and the mailbox that carries
 * every message between threads. The health module links it too (for the
 * mailbox and the clock).
 */
#ifndef LB_CORE_H
#define LB_CORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "conf.h"

struct event_base;

/* ---------------------------------------------------------------- log.c */

/* The clocks: monotonic milliseconds (deadlines, detection times; the same
 * clock every thread compares) and wall-clock seconds (what /stats shows).
 * Any thread. */
uint64_t lb_mono_ms(void);
uint64_t lb_mono_us(void);
double lb_wall_now(void);

/* An event_base with libevent's EVENT_BASE_FLAG_* flags (each caller says
 * why its own). NULL when out of memory. */
struct event_base *lb_base_new(int flags);

/* ms as the struct timeval libevent's timers take. */
static inline struct timeval
lb_tv_ms(uint64_t ms)
{
    struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
                          .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
    return tv;
}

/* Process-wide: the one piece of global mutable state besides shutdown. */
void lb_log_set_level(enum conf_log_level level);
/* Where lines go, once at start, before other threads: stderr (with a
 * journald priority prefix when JOURNAL_STREAM names stderr), or syslog
 * at syslog_path. -1 with err set when that socket cannot be reached:
 * lines then go to stderr. */
int lb_log_set_target(enum conf_log_target target, const char *syslog_path, char *err,
                      size_t errlen);
bool lb_log_enabled(enum conf_log_level level);

/* Writes one line "ts=... level=... event=EVENT <fmt...>" to stderr with a
 * single write(2), so lines of different threads never interleave. fmt is
 * the key=value tail; values that may hold spaces or quotes go through
 * lb_log_quote(). Any thread. Use the lb_log() macro, which checks the
 * level before formatting. */
void lb_log_emit(enum conf_log_level level, const char *event,
                 const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define lb_log(level, event, ...)                                            \
    do {                                                                     \
        if (lb_log_enabled(level))                                           \
            lb_log_emit(level, event, __VA_ARGS__);                          \
    } while (0)

/* A rate limit for one event that single clients can cause many of at once
 * (no_server, connect_failed, queue_timeout...): at most per_s lines in
 * each second; the first line written after some were held back carries
 * suppressed=N, how many. Declare one per event, static:
 *     static struct lb_log_limit lim = LB_LOG_LIMIT(50);
 * Any thread (the count is approximate under races, never blocking). */
struct lb_log_limit {
    uint32_t per_s;
    _Atomic uint64_t window_ms;         /* start of the current second */
    _Atomic uint32_t used;              /* lines written in it */
    _Atomic uint32_t held;              /* held back since the last line */
};
#define LB_LOG_LIMIT(n) { .per_s = (n) }
/* The limit of per-client events. */
#define LB_LOG_CLIENT_EVENTS_PER_S 50

/* True when one more line may be written now; *held is then the count of
 * lines held back before it. */
bool lb_log_limit_take(struct lb_log_limit *l, uint32_t *held);

#define lb_log_limited(limit, level, event, fmt, ...)                        \
    do {                                                                     \
        uint32_t lb_held_;                                                   \
        if (lb_log_enabled(level) && lb_log_limit_take(limit, &lb_held_)) {  \
            if (lb_held_ != 0)                                               \
                lb_log_emit(level, event, fmt " suppressed=%u", __VA_ARGS__, \
                            lb_held_);                                       \
            else                                                             \
                lb_log_emit(level, event, fmt, __VA_ARGS__);                 \
        }                                                                    \
    } while (0)

/* Sends libevent's own messages (it prints warnings to stderr otherwise,
 * e.g. one per failed accept(2)) through lb_log as event=libevent, at most
 * one a second. Once, before threads start. */
void lb_log_route_libevent(void);

/* Returns s ready for a key=value log line: as is when it is a plain token,
 * otherwise double-quoted with quotes, backslashes and control characters
 * escaped (one event stays one line). Writes into buf (len bytes). */
const char *lb_log_quote(char *buf, size_t len, const char *s);

/* ---------------------------------------------------------------- net.c */

/* "host:port" / "[v6]:port" of a socket address, into buf. */
const char *lb_net_addr_text(const struct sockaddr *sa, char *buf, size_t len);

/* A non-blocking listening socket of type SOCK_STREAM (listening) or
 * SOCK_DGRAM (bound) with SO_REUSEADDR, bound to addr. With reuseport
 * (frontends: one socket per worker, the kernel spreads accepts and
 * datagrams over them) also SO_REUSEPORT. Returns the fd, or -1 with err
 * set and errno that of the failed call. */
int lb_net_listen(const struct sockaddr *addr, socklen_t len, int type, bool reuseport,
                  char *err, size_t errlen);

/* Whether a new listener on addr would be alone there: binds a socket
 * without SO_REUSEPORT and closes it. 0 when the address is free, else the
 * bind's errno (EADDRINUSE: some socket listens there) with err set. A
 * free answer holds only until the caller binds: call it right before
 * lb_net_listen. Any thread. */
int lb_net_check_free(const struct sockaddr *addr, socklen_t len, int type, char *err,
                      size_t errlen);

/* Raises the soft RLIMIT_NOFILE to the hard one; returns the new limit. */
uint64_t lb_net_raise_fd_limit(void);

/* Tells the service manager (systemd's sd_notify protocol: one datagram of
 * "KEY=VALUE" lines to the socket in $NOTIFY_SOCKET, "@" for an abstract
 * name) state, e.g. "READY=1". Written here rather than linking
 * libsystemd for one sendto(). 0, also without $NOTIFY_SOCKET; -1 with
 * errno when the datagram could not be sent. Any thread. */
int lb_net_notify(const char *state);

/* Blocks the process signals (SIGTERM, SIGINT, SIGHUP, SIGUSR2) in the
 * calling thread, the previous mask in *old for pthread_sigmask(
 * SIG_SETMASK): threads created meanwhile inherit the mask, so only main,
 * where libevent handles them, takes them. */
void lb_signals_block(sigset_t *old);

/* -------------------------------------------------------------- proxy.c
 * The PROXY protocol, v1 (a text line) and v2 (binary), as HAProxy's
 * doc/proxy-protocol.txt defines it: written in front of what lb sends a
 * server, read in front of what a balancer before lb sends it. Pure: no
 * sockets, no state, any thread. */

/* What a received header may take: v1's longest line is 107 bytes; v2 is
 * 16 bytes and its TLVs, which balancers keep small (HAProxy's own cap is
 * its buffer). Longer is LB_PROXY_TOO_LONG. */
#define LB_PROXY_V1_MAX 107
#define LB_PROXY_HEADER_MAX 1024

/* Why a received header was refused: the reason= of event=proxy_header_bad
 * and the label of lb_frontend_proxy_header_bad_total. The parser returns
 * the first four; the session adds the last two. */
enum lb_proxy_bad {
    LB_PROXY_NOT_PROXY = 0,         /* neither signature */
    LB_PROXY_MALFORMED,             /* a signature, then bytes that are not
                                       a header */
    LB_PROXY_WRONG_VERSION,         /* v1 where only v2 is accepted, or the
                                       other way, or v2's version is not 2 */
    LB_PROXY_TOO_LONG,              /* over LB_PROXY_V1_MAX/_HEADER_MAX */
    LB_PROXY_TIMEOUT,               /* not complete within accept_proxy_timeout */
    LB_PROXY_CLOSED,                /* the client closed or reset first */
    LB_PROXY_BADS
};
const char *lb_proxy_bad_name(enum lb_proxy_bad b);   /* "not_proxy", ... */

/* A received header's addresses. is_local: LOCAL (v2), UNKNOWN (v1), or a
 * family lb does not take an address from (v2 AF_UNSPEC, AF_UNIX): the
 * connection's own peer is the client. Otherwise src and dst are AF_INET
 * or AF_INET6 sockaddrs with their ports. */
struct lb_proxy_addrs {
    bool is_local;
    struct sockaddr_storage src, dst;
};

/* Reads a header from the first len bytes a client sent (any prefix of
 * them: a header may come in many reads), taking the versions accept says
 * (V1 only v1, V2 only v2, ANY both). Returns the header's length (> 0)
 * with *out filled and the rest of buf the client's own bytes; 0 when the
 * bytes so far are a prefix of a header that may still be valid; -1 with
 * *bad set (one of the first four reasons) at the first byte after which
 * no more bytes can make it one: garbage is refused at once, not at the
 * timeout. *out is written only on success. Fed any prefix of an input it
 * answers 0 or the same as for the whole (tests/fuzz/fuzz_proxy.c checks
 * it). v2's TLVs are checked for form and skipped; LOCAL's whole block is
 * skipped unread (the spec: its family is ignored). */
int lb_proxy_parse(const uint8_t *buf, size_t len, enum conf_proxy accept,
                   struct lb_proxy_addrs *out, enum lb_proxy_bad *bad);

/* The extras v2 carries (PP2_TYPE_UNIQUE_ID, PP2_TYPE_AUTHORITY); NULL
 * or "" for none. v1 has no room for them. */
struct lb_proxy_tlvs {
    const char *unique_id;
    const char *authority;          /* the client's SNI */
};

/* The longest header lb_proxy_build writes: v2 with both TLVs at their
 * longest (a unique id of 128 bytes, a DNS name of 255). */
#define LB_PROXY_BUILD_MAX 512

/* Writes the header for a connection from src to dst in version v (V1 or
 * V2) into buf (LB_PROXY_BUILD_MAX bytes) and returns its length (0 for
 * OFF: no header). src and dst NULL: the connection is lb's own (a health
 * check): v1 "PROXY UNKNOWN", v2 LOCAL. Addresses of two families (an
 * IPv4 client on an IPv6 socket) are written both as IPv6, IPv4-mapped; a
 * family that is neither IPv4 nor IPv6 gives v1 UNKNOWN, v2 LOCAL (as
 * HAProxy). A TLV value longer than the spec's cap (unique id 128 bytes,
 * authority 255) is left out, never cut. */
size_t lb_proxy_build(uint8_t *buf, enum conf_proxy v, const struct sockaddr *src,
                      const struct sockaddr *dst, const struct lb_proxy_tlvs *tlvs);

/* ---------------------------------------------------------- tls_hello.c
 * The server name a TLS client asks for (SNI, RFC 6066 section 3), read
 * from the first bytes it sends: the TLS records (RFC 8446 section 5.1,
 * the same framing in TLS 1.0 to 1.3) that carry its ClientHello (RFC 8446
 * section 4.1.2, the same layout in TLS 1.2), which may be split across
 * records and across reads. Nothing is decrypted or answered: lb routes by
 * it and passes every byte on. Pure: no sockets, no state, any thread. */

/* A DNS name's longest text form, without the trailing dot. */
#define LB_SNI_NAME_MAX 253

/* Why a first flight was not routed by name: the reason= of
 * event=sni_unroutable and the label of lb_frontend_sni_unroutable_total.
 * The reader returns the first three; the session adds the last two. */
enum lb_sni_bad {
    LB_SNI_NOT_TLS = 0,             /* not a TLS handshake record that opens
                                       with a ClientHello */
    LB_SNI_MALFORMED,               /* a ClientHello whose lengths or
                                       server_name do not hold together */
    LB_SNI_TOO_LONG,                /* the hello needs more than the cap */
    LB_SNI_TIMEOUT,                 /* not complete within sni_timeout */
    LB_SNI_TRUNCATED,               /* the client ended it first */
    LB_SNI_BADS
};
const char *lb_sni_bad_name(enum lb_sni_bad b);       /* "not_tls", ... */

/* Reads the first len bytes a client sent (any prefix of its stream),
 * taking at most max of them. Returns:
 *   1  the ClientHello's server name is known: name holds it (lower case,
 *      without a trailing dot; "" when the hello has no server_name of
 *      type host_name), NUL-terminated, LB_SNI_NAME_MAX + 1 bytes;
 *   0  the bytes so far are a prefix that may still become one: *need is
 *      how many bytes (from the first) the reader wants before it can say
 *      more, always > len and <= max (so a caller peeks again only once
 *      that many have arrived: a hello sent a byte at a time is not read
 *      again after every byte);
 *  -1  with *bad set (one of the first three reasons) at the first byte
 *      after which no more bytes can make it one.
 * The reader stops at the end of the server_name extension: what follows
 * it is not read. Fed any prefix of an input it answers 0 or the same as
 * for the whole (tests/fuzz/fuzz_tls_hello.c checks it). name and *bad are
 * written only with their answer. */
int lb_hello_sni(const uint8_t *buf, size_t len, size_t max, char *name, size_t *need,
                 enum lb_sni_bad *bad);

/* --------------------------------------------------------------- text.c */

/* A text built line by line (under a lock) and written or sent after it.
 * Starts zeroed; grows as needed. Out of memory, it is freed and stays
 * failed: every later call fails too. lb_text_take hands it over. */
struct lb_text {
    char *p;
    size_t len, cap;
    bool is_failed;
};
/* Room for n more bytes (and a NUL) at p + len; the caller adds what it
 * wrote to len. NULL when out of memory. */
char *lb_text_room(struct lb_text *t, size_t n);
/* Appends, formatted; -1 when out of memory. */
int lb_text_printf(struct lb_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text (the caller frees it) and its length; an empty one when nothing
 * was added, NULL when out of memory. */
char *lb_text_take(struct lb_text *t, size_t *len);

/* ------------------------------------------------------------ mailbox.c
 * The one way threads talk: a queue of fixed-size messages to the thread
 * that runs an event_base. Any thread posts a copy of a message; the owner
 * gets every message posted since its last batch, in the order posted, in
 * one callback on its own loop. Posting wakes the owner only when the queue
 * goes from empty to non-empty (the owner takes the whole queue at once),
 * so a burst costs one wake-up. Model: h2o's h2o_multithread_queue.
 */
struct lb_mailbox;

/* Called on the owner's thread with n messages of the mailbox's size; the
 * batch is freed after the call. */
typedef void (*lb_mailbox_pt)(void *msgs, size_t n, void *arg);

/* A mailbox on base (the owner's loop) for messages of msg_size bytes.
 * NULL when out of memory. The owner's thread, or before it starts. */
struct lb_mailbox *lb_mailbox_new(struct event_base *base, size_t msg_size,
                                  lb_mailbox_pt on_msgs, void *arg);

/* Copies msg into the mailbox. Any thread. -1 when out of memory (the
 * message is not queued). */
int lb_mailbox_post(struct lb_mailbox *mb, const void *msg);
/* The same for n messages in a row: one lock, at most one wake-up. */
int lb_mailbox_post_n(struct lb_mailbox *mb, const void *msgs, size_t n);

/* Frees the mailbox once no thread posts any more. Messages never
 * delivered go to drop (when not NULL, and there are any), for an owner
 * whose messages hold references: it releases them there. */
void lb_mailbox_free(struct lb_mailbox *mb, lb_mailbox_pt drop, void *arg);

/* --------------------------------------------------------------- hist.c */

/* Fixed-bucket histogram in milliseconds, exported in seconds. */
#define LB_HIST_BUCKETS 15
extern const double lb_hist_bounds_ms[LB_HIST_BUCKETS];
struct lb_hist {
    uint64_t buckets[LB_HIST_BUCKETS];  /* not cumulative */
    uint64_t count;
    double sum_ms;
};
void lb_hist_observe(struct lb_hist *h, double ms);
/* The same, observed by any thread (the workers) without a lock; read
 * into a struct lb_hist for printing. */
struct lb_ahist {
    _Atomic uint64_t buckets[LB_HIST_BUCKETS];
    _Atomic uint64_t count;
    _Atomic uint64_t sum_us;
};
void lb_ahist_observe(struct lb_ahist *h, uint64_t us);
void lb_ahist_read(const struct lb_ahist *h, struct lb_hist *out);

#endif /* LB_CORE_H */
