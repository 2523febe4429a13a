/*
 * bal_outlier.h - outlier detection from live traffic (pool key outlier): a
 * server whose client connections fail errors times within window leaves
 * rotation for eject, longer each time it does it again.
 *
 * Pure, like the rest of balancer/: no clock, no libevent, no config
 * parsing. The daemon copies the pool's conf_outlier into a struct
 * bal_outlier_conf, keeps one struct bal_outlier per server and passes the
 * monotonic time in. What it decides (eject now, back now) goes to the
 * rotation decision as one more input; that wiring is the daemon's.
 *
 * Threads: workers never touch a struct bal_outlier. They post error
 * events (server, kind, time) to the main thread, which calls every
 * function here under its state lock. Nothing is atomic.
 *
 * A server's life under outlier detection:
 *
 *   counting --record() true--> [caller: may_eject()?] --yes--> eject()
 *      ^                              | no: refused()                |
 *      |                              v (stays counting; the errors  |
 *      |                                 stay in the window)         v
 *      +------------- expire() true (its eject time is over) ---- ejected
 *
 * Nothing else brings an ejected server back: a passing probe, its agent's
 * "up" or a heartbeat do not (it is back when its time is over, as in
 * Envoy; a server that fails client traffic while it passes probes is what
 * outlier detection is for).
 */
#ifndef BAL_OUTLIER_H
#define BAL_OUTLIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kinds of error a client connection can meet at a server, as the
 * workers tell them apart. Their names are the `kind` label of
 * lb_server_ejections_total{pool,server,kind}. */
enum bal_outlier_kind {
    BAL_OUTLIER_CONNECT_REFUSED = 0,    /* RST to the SYN (or ICMP
                                           unreachable) */
    BAL_OUTLIER_CONNECT_TIMEOUT,        /* no answer within
                                           connect_timeout */
    BAL_OUTLIER_RESET,                  /* connected, then reset before the
                                           server's first byte */
    BAL_OUTLIER_NO_FIRST_BYTE,          /* the client sent data and the
                                           server sent nothing for
                                           first_byte_timeout */
    BAL_OUTLIER_KINDS
};

/* "connect_refused", "connect_timeout", "reset", "no_first_byte"; for an
 * unknown value "unknown". */
const char *bal_outlier_kind_name(enum bal_outlier_kind k);

/* The pool's settings, as conf/ parsed them (struct conf_outlier). */
struct bal_outlier_conf {
    uint32_t errors;                /* N in window ejects; 0 = off */
    uint64_t window_ms;             /* > 0 when errors > 0 */
    uint64_t eject_ms;              /* the first ejection's length, > 0 */
    uint32_t max_eject_percent;     /* 0..100 of the pool's servers */
};

/* The sliding window: BAL_OUTLIER_BUCKETS buckets of window_ms /
 * BAL_OUTLIER_BUCKETS (rounded up) each, the newest one filling. See
 * outlier.c for its bound and error. */
#define BAL_OUTLIER_BUCKETS 10

/* An ejection lasts eject_ms times 1, 2, 4, 8, then 10 for every repeat
 * after: the doubling stops at BAL_OUTLIER_MAX_FACTOR times the base. */
#define BAL_OUTLIER_MAX_FACTOR 10u

/* One server's state: 128 bytes, fixed, no allocation (10,000 servers take
 * 1.3 MB). Zeroed, or after bal_outlier_init: counting, nothing seen.
 * Owned by the daemon (one per server, kept across reloads like its
 * health); main thread only. Fields start with '_': only outlier.c reads
 * or writes them. */
struct bal_outlier {
    uint16_t _counts[BAL_OUTLIER_BUCKETS][BAL_OUTLIER_KINDS];
    uint16_t _reason[BAL_OUTLIER_KINDS];    /* the window's counts when
                                               record() last returned
                                               true: the reason text's */
    uint64_t _bucket_ms;            /* the buckets' width they were filled
                                       with: a reload that changes the
                                       window starts them over */
    uint64_t _head;                 /* the newest bucket's number,
                                       time / _bucket_ms */
    uint64_t _until_ms;             /* with _is_ejected: back at this time */
    uint64_t _back_ms;              /* when the last ejection ended (0:
                                       none yet): the clean time since
                                       then lowers _level */
    uint8_t _level;                 /* doublings of the next ejection, 0..4
                                       (4: BAL_OUTLIER_MAX_FACTOR) */
    bool _is_ejected;
    bool _is_refused;               /* the cap refused an ejection since the
                                       last one */
};

/* A fresh server: counting, nothing seen, the next ejection 1x. */
void bal_outlier_init(struct bal_outlier *o);

/* Counts one error of kind k seen at now_ms (the time the worker saw it:
 * events may arrive a little out of order, and an error older than the
 * window is dropped). Returns true when the server should be ejected now:
 * conf->errors or more errors, of any kind, are in the window. The caller
 * then asks bal_outlier_may_eject and calls bal_outlier_eject, or
 * bal_outlier_refused. It keeps returning true on each further error while
 * the window holds enough of them, so that a server the cap refused is
 * ejected on its next error once the cap has room. Does nothing and
 * returns false when conf->errors is 0 (off) and while the server is
 * ejected (until bal_outlier_expire brought it back). */
bool bal_outlier_record(struct bal_outlier *o, const struct bal_outlier_conf *conf,
                        enum bal_outlier_kind k, uint64_t now_ms);

/* The error of a connection begun at began_ms, before the server's last
 * ejection ended: it met the fault that ejected the server, and must not
 * count towards its next ejection (the caller drops it before record()). */
bool bal_outlier_is_before_return(const struct bal_outlier *o, uint64_t began_ms);

/* Ejects the server at now_ms and returns when it is to come back. The
 * length is eject_ms times 2^level, at most BAL_OUTLIER_MAX_FACTOR times;
 * the level rises by one with each ejection and falls by one for each
 * whole eject_ms the server spent back in rotation since its last
 * ejection ended (Envoy's rule, there counted in sweep intervals). Empties
 * the window: once back, it takes conf->errors new errors. An ejected
 * server stays as it is: its current until_ms is returned. */
uint64_t bal_outlier_eject(struct bal_outlier *o, const struct bal_outlier_conf *conf,
                           uint64_t now_ms);

/* The cap refused the ejection record() asked for. Returns true the first
 * time since the server's last ejection (the caller logs that one and
 * counts every one). The errors stay in the window: see record(). */
bool bal_outlier_refused(struct bal_outlier *o);

/* Ejected at now_ms: its eject time is not over. */
bool bal_outlier_is_ejected(const struct bal_outlier *o, uint64_t now_ms);

/* Brings the server back when its eject time is over: returns true once,
 * at the first call at or after until_ms (then it is counting again),
 * false otherwise. Its clean time counts from until_ms, not from the
 * call. */
bool bal_outlier_expire(struct bal_outlier *o, uint64_t now_ms);

/* Whether the cap lets one more server of the pool be ejected: with
 * n_ejected of its n_total servers ejected by outlier detection now, true
 * when n_ejected + 1 is at most max_eject_percent of n_total (exactly, no
 * rounding: 50% of 3 servers is 1, of 4 is 2). So 0% never ejects, 100%
 * may eject all, and a pool of one is never ejected under 100%. Servers out
 * for other reasons (health, operators) do not count: keeping a pool from
 * emptying is min_servers' guard. */
bool bal_outlier_may_eject(size_t n_total, size_t n_ejected, uint32_t max_eject_percent);

/* The kind that weighed most in the errors record() last returned true
 * for (ties: the first in enum order): the `kind` label of the ejection
 * metric. BAL_OUTLIER_CONNECT_REFUSED when there were none. */
enum bal_outlier_kind bal_outlier_reason_kind(const struct bal_outlier *o);

/* Why, as one line into buf (len bytes, NUL-terminated, cut if short):
 * "outlier: 5 connect timeouts in 10 s", "outlier: 3 connect refused, 2
 * no first byte in 10 s": the kinds of the errors record() last returned
 * true for, most first, and the window. Returns what snprintf would. */
int bal_outlier_reason(const struct bal_outlier *o, const struct bal_outlier_conf *conf,
                       char *buf, size_t len);

#endif /* BAL_OUTLIER_H */
