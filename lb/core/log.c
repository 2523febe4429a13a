/*
 * log.c - one line per event, key=value: on stderr, or to syslog.
 *
 * Each line is formatted into a stack buffer and written with one write(2)
 * (or sent as one datagram): lines of several threads never interleave,
 * and a line longer than the buffer is cut rather than split.
 *
 * On stderr under systemd (JOURNAL_STREAM names stderr) each line starts
 * with its syslog priority, "<6>" for info, which journald takes for the
 * line's priority and strips: `journalctl -p warning` shows warnings and
 * errors. With log_target = syslog, lines go to syslog_socket as RFC 5424
 * messages of facility daemon; a line the socket refuses goes to stderr.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "core.h"

#define LB_LOG_LINE_MAX 2048

static _Atomic int lb_log_min_level = CONF_LOG_INFO;

/* Where lines go: set once at start (lb_log_set_target), before any
 * thread but main runs. */
static bool lb_log_is_journal;          /* stderr is journald's stream */
static int lb_log_syslog_fd = -1;       /* connected to syslog_socket */
static char lb_log_host[65] = "-";
static int lb_log_pid;

/* RFC 5424's severities, by level. */
static const int lb_log_severity[] = {
    [CONF_LOG_DEBUG] = 7, [CONF_LOG_INFO] = 6, [CONF_LOG_WARN] = 4, [CONF_LOG_ERROR] = 3,
};
#define LB_LOG_FACILITY_DAEMON 3

uint64_t
lb_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
lb_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

double
lb_wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct event_base *
lb_base_new(int flags)
{
    struct event_config *cfg = event_config_new();
    struct event_base *base;

    if (cfg == NULL)
        return NULL;
    if (flags != 0)
        event_config_set_flag(cfg, flags);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return base;
}

void
lb_log_set_level(enum conf_log_level level)
{
    atomic_store_explicit(&lb_log_min_level, (int)level, memory_order_relaxed);
}

bool
lb_log_enabled(enum conf_log_level level)
{
    return (int)level >=
           atomic_load_explicit(&lb_log_min_level, memory_order_relaxed);
}

/* JOURNAL_STREAM is "DEVICE:INODE" of the stream journald gave the service;
 * it counts only while stderr is still that stream (not redirected). */
static bool
lb_log_stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;

    return js != NULL && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
           fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
           (unsigned long long)st.st_ino == ino;
}

int
lb_log_set_target(enum conf_log_target target, const char *syslog_path, char *err,
                  size_t errlen)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    int fd;

    lb_log_is_journal = lb_log_stderr_is_journal();
    if (target != CONF_LOG_TO_SYSLOG)
        return 0;
    lb_log_pid = (int)getpid();
    if (gethostname(lb_log_host, sizeof(lb_log_host) - 1) != 0 || lb_log_host[0] == '\0')
        snprintf(lb_log_host, sizeof(lb_log_host), "-");
    if (strlen(syslog_path) >= sizeof(sun.sun_path)) {
        snprintf(err, errlen, "syslog_socket %s: path too long", syslog_path);
        return -1;
    }
    memcpy(sun.sun_path, syslog_path, strlen(syslog_path));
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
        snprintf(err, errlen, "syslog_socket %s: %s", syslog_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    lb_log_syslog_fd = fd;
    return 0;
}

static void
lb_log_write_stderr(const char *line, size_t n)
{
    /* stderr may be a pipe that a supervisor reads: retry short writes and
     * EINTR, give up on anything else (there is nowhere to report it). */
    for (size_t off = 0; off < n;) {
        ssize_t w = write(STDERR_FILENO, line + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

bool
lb_log_limit_take(struct lb_log_limit *l, uint32_t *held)
{
    uint64_t now = lb_mono_ms();
    uint64_t start = atomic_load_explicit(&l->window_ms, memory_order_relaxed);

    /* The thread that opens a new second resets the count; a thread that
     * loses that race counts against the new second, which is fine. */
    if ((start == 0 || now - start >= 1000) &&
        atomic_compare_exchange_strong(&l->window_ms, &start, now != 0 ? now : 1))
        atomic_store_explicit(&l->used, 0, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&l->used, 1, memory_order_relaxed) >= l->per_s) {
        atomic_fetch_add_explicit(&l->held, 1, memory_order_relaxed);
        return false;
    }
    *held = atomic_exchange_explicit(&l->held, 0, memory_order_relaxed);
    return true;
}

void
lb_log_emit(enum conf_log_level level, const char *event, const char *fmt, ...)
{
    /* Room before the line for the prefix of either target: "<N>", or
     * RFC 5424's "<PRI>1 TIMESTAMP HOST APP PID MSGID - ". */
    enum { HEAD = 160 };
    char buf[HEAD + LB_LOG_LINE_MAX], stamp[40], *line = buf + HEAD;
    struct timeval tv;
    struct tm tm;
    size_t n, ts_len;
    int rc, sev = lb_log_severity[level];
    va_list ap;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    n = strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp + n, sizeof(stamp) - n, ".%03dZ", (int)(tv.tv_usec / 1000));
    rc = snprintf(line, LB_LOG_LINE_MAX, "ts=%s ", stamp);
    ts_len = n = rc > 0 ? (size_t)rc : 0;
    rc = snprintf(line + n, LB_LOG_LINE_MAX - n, "level=%s event=%s ",
                  conf_log_level_name(level), event);
    if (rc > 0)
        n += (size_t)rc;
    if (n < LB_LOG_LINE_MAX) {
        va_start(ap, fmt);
        rc = vsnprintf(line + n, LB_LOG_LINE_MAX - n, fmt, ap);
        va_end(ap);
        if (rc > 0)
            n += (size_t)rc;
    }
    if (n > LB_LOG_LINE_MAX - 2)
        n = LB_LOG_LINE_MAX - 2;
    while (n > 0 && line[n - 1] == ' ')     /* an empty tail leaves a space */
        n--;
    line[n++] = '\n';

    if (lb_log_syslog_fd >= 0) {
        /* The message is the line without its ts= (the header has it) and
         * its newline; the event's name is the MSGID. */
        char head[HEAD];
        int h = snprintf(head, sizeof(head), "<%d>1 %s %s lb %d %.32s - ",
                         LB_LOG_FACILITY_DAEMON * 8 + sev, stamp, lb_log_host, lb_log_pid,
                         event);
        size_t body = n - ts_len - 1;

        if (h > 0 && (size_t)h <= ts_len + HEAD) {
            char *msg = line + ts_len - h;

            memcpy(msg, head, (size_t)h);
            if (send(lb_log_syslog_fd, msg, (size_t)h + body, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
                return;
        }
        /* refused, or full: the line is not lost, stderr has it */
    }
    if (lb_log_is_journal) {
        char pri[4] = { '<', (char)('0' + sev), '>', 0 };

        line -= 3;
        memcpy(line, pri, 3);
        n += 3;
    }
    lb_log_write_stderr(line, n);
}

static void
lb_log_on_libevent(int severity, const char *msg)
{
    /* a message per failed accept(2), per bad request...: one a second */
    static struct lb_log_limit limit = LB_LOG_LIMIT(1);
    enum conf_log_level level = severity >= EVENT_LOG_ERR ? CONF_LOG_ERROR :
                                severity == EVENT_LOG_WARN ? CONF_LOG_WARN :
                                severity == EVENT_LOG_MSG ? CONF_LOG_INFO : CONF_LOG_DEBUG;
    char qbuf[512];

    lb_log_limited(&limit, level, "libevent", "msg=%s", lb_log_quote(qbuf, sizeof(qbuf), msg));
}

void
lb_log_route_libevent(void)
{
    event_set_log_callback(lb_log_on_libevent);
}

const char *
lb_log_quote(char *buf, size_t len, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    bool plain = *s != '\0';
    size_t o = 0;

    for (const char *p = s; *p && plain; p++)
        plain = (unsigned char)*p > ' ' && *p != '"' && *p != '\\' &&
                *p != '=' && (unsigned char)*p != 0x7f;
    if (plain || len < 3)
        return s;

    buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (o + 6 >= len)                   /* room for \xNN, quote, NUL */
            break;
        if (*p == '"' || *p == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)*p;
        } else if (*p < ' ' || *p == 0x7f) {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[*p >> 4];
            buf[o++] = hex[*p & 0xf];
        } else {
            buf[o++] = (char)*p;
        }
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}
