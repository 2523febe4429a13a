/* udp_load.c - the UDP programs of tests/bench/udp_cost.py: a DNS load at a fixed
 * rate that measures each reply's latency, a flood of one-way datagrams, a sink that
 * counts them, and a DNS responder that answers every query with one fixed record.
 *
 * udp_cost.py compiles this with `cc -O2` into its temporary directory; nothing built
 * goes into the tree. Linux only (recvmmsg, sendmmsg, SO_RCVBUFFORCE).
 *
 *   udp_load dns PORT RATE SECS FLOWS NAME
 *       A query for NAME (type A) to 127.0.0.1:PORT every 1/RATE s for SECS, from
 *       FLOWS sockets in turn (each a client: its own source port). Each reply must
 *       come back to the socket its query left from, with the query's ID, NOERROR
 *       and at least one answer. After SECS, waits up to DRAIN_MS for late replies.
 *       Prints one line: sent= answered= lost= bad= late= p50_us= p90_us= p99_us=
 *       p999_us= max_us= secs= (secs: the time the sending took).
 *   udp_load dnsloop PORT SECS FLOWS NAME
 *       A closed loop: each of FLOWS sockets has one query for NAME outstanding at a
 *       time, the next sent when its reply came (checked as above) or after
 *       LOOP_TIMEOUT_MS (lost; its reply, if it comes, is late). Prints: sent= answered=
 *       lost= bad= late= qps= mean_us= secs=.
 *   udp_load flood PORT SIZE RATE SECS FLOWS
 *       SIZE-byte syslog-like datagrams (RFC 5424 header, then filler) to
 *       127.0.0.1:PORT at RATE/s for SECS, FLOWS sockets in turn, in small batches
 *       (sendmmsg) every PACE_US. Prints: sent= errors= secs=.
 *   udp_load sink PORT COUNTFILE
 *       Counts the datagrams that arrive on 127.0.0.1:PORT. COUNTFILE is created and
 *       holds three little-endian uint64 (datagrams, bytes, datagrams of another size
 *       than the first one) that are updated after every batch (mmap), so that the
 *       driver reads them while the sink runs. Runs until killed.
 *   udp_load respond PORT
 *       Answers each DNS query on 127.0.0.1:PORT with its question and one A record,
 *       192.0.2.1, TTL 300 (additional records such as EDNS are dropped). Runs until
 *       killed. A reference answerer much cheaper than a real DNS server.
 *
 * Every loop is bounded in time: dns, dnsloop and flood stop after SECS (dns: plus
 * DRAIN_MS); sink and respond are stopped by the driver, by pid.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH       64         /* datagrams per recvmmsg / sendmmsg */
#define MAX_FLOWS   1024
#define PACE_US     50         /* flood: one batch every so often (finer = fewer bursts) */
#define DRAIN_MS    1000       /* dns: how long to wait for replies after the last query */
#define HIST_US     1000000    /* dns: latencies above 1 s count as late, not in the histogram */
#define LOOP_TIMEOUT_MS 200    /* dnsloop: a query unanswered for this long is lost */
#define SOCK_BUF    (8 << 20)  /* our sockets' buffers: the load must not be where drops happen */

static uint64_t ul_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void ul_sleep_until(uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
                           .tv_nsec = (long)(ns % 1000000000u) };

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static int ul_parse(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "udp_load: \"%s\" is not a number in %ld..%ld\n", s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static void ul_loopback(struct sockaddr_in *sa, int port)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

/* A UDP socket with big buffers; bound to PORT when bind_port > 0, else connected
 * to 127.0.0.1:connect_port (an ephemeral source port: one client flow). */
static int ul_socket(int bind_port, int connect_port)
{
    struct sockaddr_in sa;
    int buf = SOCK_BUF;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    if (fd == -1) {
        perror("udp_load: socket");
        return -1;
    }
    /* FORCE variants pass net.core.[rw]mem_max when we are root; else the plain ones. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) == -1)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) == -1)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    if (bind_port > 0) {
        ul_loopback(&sa, bind_port);
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
            fprintf(stderr, "udp_load: bind 127.0.0.1:%d: %s\n", bind_port, strerror(errno));
            close(fd);
            return -1;
        }
    } else {
        ul_loopback(&sa, connect_port);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
            fprintf(stderr, "udp_load: connect 127.0.0.1:%d: %s\n", connect_port,
                    strerror(errno));
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* ------------------------------------------------------------ DNS messages */

/* A query (RD set, one question NAME IN A) with id 0 into buf; its length or -1. */
static int ul_dns_query(const char *name, unsigned char *buf, size_t cap)
{
    size_t n = 12;
    const char *p = name;

    memset(buf, 0, 12);
    buf[2] = 0x01;                                  /* RD */
    buf[5] = 1;                                     /* QDCOUNT */
    while (*p != '\0') {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);

        if (len == 0 || len > 63 || n + len + 1 + 5 > cap)
            return -1;
        buf[n++] = (unsigned char)len;
        memcpy(buf + n, p, len);
        n += len;
        p += len + (dot ? 1 : 0);
    }
    buf[n++] = 0;
    buf[n++] = 0, buf[n++] = 1;                     /* QTYPE A */
    buf[n++] = 0, buf[n++] = 1;                     /* QCLASS IN */
    return (int)n;
}

/* Offset just past the question of a message with QDCOUNT 1, or -1. */
static int ul_dns_question_end(const unsigned char *m, size_t len)
{
    size_t n = 12;

    if (len < 12 || m[4] != 0 || m[5] != 1)
        return -1;
    while (n < len && m[n] != 0) {
        if (m[n] > 63)                              /* no compression in a question */
            return -1;
        n += (size_t)m[n] + 1;
    }
    if (n + 5 > len)
        return -1;
    return (int)(n + 5);
}

/* ------------------------------------------------------------ dns: fixed-rate load */

struct ul_pending {
    uint64_t sent_ns;   /* 0: no query with this ID is waiting */
    int      flow;
};

static int ul_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* The latency under which a fraction q of the answered queries fell. */
static uint32_t ul_quantile(const uint32_t *sorted, size_t n, double q)
{
    size_t i;

    if (n == 0)
        return 0;
    i = (size_t)(q * (double)n);
    return sorted[i < n ? i : n - 1];
}

static int ul_dns(int port, long rate, long secs, long flows, const char *name)
{
    static struct ul_pending pending[65536];
    unsigned char query[512], buf[BATCH][1500];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct pollfd pfd[MAX_FLOWS];
    uint64_t sent = 0, answered = 0, lost = 0, bad = 0, late = 0, total, t0, end, send_end;
    uint32_t *lat;
    size_t nlat = 0;
    int qlen = ul_dns_query(name, query, sizeof(query));

    if (qlen < 0) {
        fprintf(stderr, "udp_load: bad name \"%s\"\n", name);
        return 1;
    }
    total = (uint64_t)rate * (uint64_t)secs;
    lat = calloc(total ? total : 1, sizeof(*lat));
    if (lat == NULL) {
        perror("udp_load: calloc");
        return 1;
    }
    for (long f = 0; f < flows; f++) {
        pfd[f].fd = ul_socket(0, port);
        pfd[f].events = POLLIN;
        if (pfd[f].fd == -1)
            return 1;
    }
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = buf[i];
        iov[i].iov_len = sizeof(buf[i]);
        memset(&msgs[i], 0, sizeof(msgs[i]));
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    (void)prctl(PR_SET_TIMERSLACK, 1UL);           /* wake when a query is due, not 50 us on */
    t0 = ul_now_ns();
    send_end = t0;
    end = t0 + (uint64_t)secs * 1000000000u + (uint64_t)DRAIN_MS * 1000000u;
    for (;;) {
        uint64_t now = ul_now_ns();
        uint64_t due = sent < total ? t0 + sent * 1000000000u / (uint64_t)rate : 0;
        struct timespec wait;
        uint64_t wait_ns;

        /* send every query that is due by now: the schedule, not the replies, sets the
         * pace (an open loop), so a slow proxy shows as latency and loss, not as less load */
        while (sent < total && due <= now) {
            uint16_t id = (uint16_t)sent;
            int f = (int)(sent % (uint64_t)flows);

            if (pending[id].sent_ns != 0)
                lost++;                             /* unanswered 65536 queries later */
            query[0] = (unsigned char)(id >> 8);
            query[1] = (unsigned char)id;
            pending[id].sent_ns = ul_now_ns();
            pending[id].flow = f;
            if (send(pfd[f].fd, query, (size_t)qlen, 0) != qlen) {
                pending[id].sent_ns = 0;
                bad++;
            }
            sent++;
            if (sent == total)
                send_end = ul_now_ns();
            due = sent < total ? t0 + sent * 1000000000u / (uint64_t)rate : 0;
        }
        if (sent == total && (answered + lost + bad + late >= total || now >= end))
            break;
        /* sleep until the next query is due or a reply comes: ppoll, not poll, whose
         * millisecond timeout would either spin or send in bursts; the load shares its
         * CPU with the backends, so it must not spin */
        wait_ns = sent < total ? (due > now ? due - now : 0) : (end > now ? end - now : 0);
        wait.tv_sec = (time_t)(wait_ns / 1000000000u);
        wait.tv_nsec = (long)(wait_ns % 1000000000u);
        if (ppoll(pfd, (nfds_t)flows, &wait, NULL) < 0 && errno != EINTR) {
            perror("udp_load: ppoll");
            return 1;
        }
        for (long f = 0; f < flows; f++) {
            int got;

            if (!(pfd[f].revents & POLLIN))
                continue;
            got = recvmmsg(pfd[f].fd, msgs, BATCH, MSG_DONTWAIT, NULL);
            now = ul_now_ns();
            for (int i = 0; i < got; i++) {
                const unsigned char *m = buf[i];
                unsigned len = msgs[i].msg_len;
                uint16_t id;

                if (len < 12 || !(m[2] & 0x80) || (m[3] & 0x0f) != 0 || (m[6] | m[7]) == 0) {
                    bad++;                          /* not a NOERROR reply with an answer */
                    continue;
                }
                id = (uint16_t)(m[0] << 8 | m[1]);
                if (pending[id].sent_ns == 0 || pending[id].flow != (int)f) {
                    bad++;                          /* a duplicate, or to the wrong client */
                    continue;
                }
                if (now - pending[id].sent_ns >= (uint64_t)HIST_US * 1000u) {
                    late++;
                } else {
                    lat[nlat++] = (uint32_t)((now - pending[id].sent_ns) / 1000u);
                    answered++;
                }
                pending[id].sent_ns = 0;
            }
        }
    }
    for (int i = 0; i < 65536; i++)
        if (pending[i].sent_ns != 0)
            lost++;
    qsort(lat, nlat, sizeof(*lat), ul_cmp_u32);
    printf("sent=%llu answered=%llu lost=%llu bad=%llu late=%llu p50_us=%u p90_us=%u "
           "p99_us=%u p999_us=%u max_us=%u secs=%.3f\n",
           (unsigned long long)sent, (unsigned long long)answered, (unsigned long long)lost,
           (unsigned long long)bad, (unsigned long long)late, ul_quantile(lat, nlat, 0.50),
           ul_quantile(lat, nlat, 0.90), ul_quantile(lat, nlat, 0.99),
           ul_quantile(lat, nlat, 0.999), nlat ? lat[nlat - 1] : 0,
           (double)(send_end - t0) / 1e9);
    free(lat);
    return 0;
}

/* ------------------------------------------------------------ dnsloop: closed loop */

/* Each of FLOWS sockets keeps exactly one query outstanding: the next leaves when
 * the reply came, or after LOOP_TIMEOUT_MS without one (lost). A client that asks
 * one question at a time, as a stub resolver from a fresh port does; a proxy that
 * ends a flow at its answer then opens one flow per query. */
static int ul_dnsloop(int port, long secs, long flows, const char *name)
{
    unsigned char query[512], buf[BATCH][1500];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct pollfd pfd[MAX_FLOWS];
    uint16_t id[MAX_FLOWS], prev_id[MAX_FLOWS];
    uint64_t sent_ns[MAX_FLOWS];
    uint64_t sent = 0, answered = 0, lost = 0, bad = 0, late = 0, t0, end, lat_sum = 0;
    uint16_t next_id = 1;
    int qlen = ul_dns_query(name, query, sizeof(query));

    if (qlen < 0) {
        fprintf(stderr, "udp_load: bad name \"%s\"\n", name);
        return 1;
    }
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = buf[i];
        iov[i].iov_len = sizeof(buf[i]);
        memset(&msgs[i], 0, sizeof(msgs[i]));
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    for (long f = 0; f < flows; f++) {
        pfd[f].fd = ul_socket(0, port);
        pfd[f].events = POLLIN;
        if (pfd[f].fd == -1)
            return 1;
    }
    t0 = ul_now_ns();
    end = t0 + (uint64_t)secs * 1000000000u;
    for (long f = 0; f < flows; f++) {
        sent_ns[f] = 0;                             /* 0: nothing outstanding: send now */
        id[f] = prev_id[f] = 0;                     /* next_id starts at 1: 0 is none */
    }
    for (;;) {
        uint64_t now = ul_now_ns();

        for (long f = 0; f < flows; f++) {
            if (sent_ns[f] != 0 && now - sent_ns[f] >= (uint64_t)LOOP_TIMEOUT_MS * 1000000u) {
                lost++;
                sent_ns[f] = 0;
            }
            if (sent_ns[f] == 0 && now < end) {
                prev_id[f] = id[f];
                id[f] = next_id++;
                if (next_id == 0)
                    next_id = 1;
                query[0] = (unsigned char)(id[f] >> 8);
                query[1] = (unsigned char)id[f];
                sent_ns[f] = ul_now_ns();
                if (send(pfd[f].fd, query, (size_t)qlen, 0) != qlen) {
                    bad++;
                    sent_ns[f] = 0;
                    continue;
                }
                sent++;
            }
        }
        if (now >= end)
            break;                                  /* what is outstanding then is not counted */
        /* 10 ms: often enough to notice a lost query, rare enough not to cost the CPU */
        if (poll(pfd, (nfds_t)flows, 10) < 0 && errno != EINTR) {
            perror("udp_load: poll");
            return 1;
        }
        for (long f = 0; f < flows; f++) {
            int got;

            if (!(pfd[f].revents & POLLIN))
                continue;
            got = recvmmsg(pfd[f].fd, msgs, BATCH, MSG_DONTWAIT, NULL);
            now = ul_now_ns();
            for (int i = 0; i < got; i++) {
                const unsigned char *m = buf[i];

                if (msgs[i].msg_len < 12 || !(m[2] & 0x80) || (m[3] & 0x0f) != 0
                    || (m[6] | m[7]) == 0) {
                    bad++;
                    continue;
                }
                if (sent_ns[f] == 0 || (uint16_t)(m[0] << 8 | m[1]) != id[f]) {
                    if ((uint16_t)(m[0] << 8 | m[1]) == prev_id[f])
                        late++;                     /* to the query given up as lost */
                    else
                        bad++;                      /* a duplicate, or another client's */
                    continue;
                }
                lat_sum += now - sent_ns[f];
                answered++;
                sent_ns[f] = 0;
            }
        }
    }
    printf("sent=%llu answered=%llu lost=%llu bad=%llu late=%llu qps=%.1f mean_us=%.1f "
           "secs=%.3f\n", (unsigned long long)sent, (unsigned long long)answered,
           (unsigned long long)lost, (unsigned long long)bad, (unsigned long long)late,
           (double)answered / (double)secs,
           answered ? (double)lat_sum / (double)answered / 1e3 : 0.0,
           (double)(ul_now_ns() - t0) / 1e9);
    return 0;
}

/* ------------------------------------------------------------ flood: one way */

static int ul_flood(int port, long size, long rate, long secs, long flows)
{
    static unsigned char msg[65536];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    int fds[MAX_FLOWS];
    uint64_t sent = 0, errors = 0, total = (uint64_t)rate * (uint64_t)secs, t0, next;
    int hdr;

    for (long f = 0; f < flows; f++)
        if ((fds[f] = ul_socket(0, port)) == -1)
            return 1;
    /* what a syslog relay carries: an RFC 5424 header, then text up to SIZE bytes */
    hdr = snprintf((char *)msg, sizeof(msg), "<134>1 2026-01-01T00:00:00.000000Z bench-host "
                   "udp_cost 4242 ID47 - ");
    for (long i = hdr; i < size; i++)
        msg[i] = (unsigned char)("abcdefghijklmnopqrstuvwxyz0123456789 "[i % 37]);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = msg;
        iov[i].iov_len = (size_t)size;
        memset(&msgs[i], 0, sizeof(msgs[i]));
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    (void)prctl(PR_SET_TIMERSLACK, 1UL);           /* wake on time: bursts stay small */
    t0 = next = ul_now_ns();
    while (sent < total) {
        uint64_t now = ul_now_ns();
        uint64_t due = (now - t0) * (uint64_t)rate / 1000000000u;

        if (due > total)
            due = total;
        while (sent < due) {
            unsigned n = due - sent > BATCH ? BATCH : (unsigned)(due - sent);
            int f = (int)((sent / BATCH) % (uint64_t)flows);   /* flows take turns by batch */
            int got = sendmmsg(fds[f], msgs, n, 0);

            if (got <= 0) {
                errors += n;                        /* e.g. ENOBUFS; counted as offered */
                sent += n;
            } else {
                sent += (uint64_t)got;
            }
        }
        /* the schedule is kept from t0: after falling behind (the CPU was busy) the
         * next batches catch up, so that the offered load is RATE over the run */
        next += PACE_US * 1000u;
        if (next > ul_now_ns())
            ul_sleep_until(next);
        else
            next = ul_now_ns();
        if (ul_now_ns() - t0 > (uint64_t)(secs + 5) * 1000000000u)
            break;                                  /* cannot keep the rate: stop anyway */
    }
    printf("sent=%llu errors=%llu secs=%.3f\n", (unsigned long long)sent,
           (unsigned long long)errors, (double)(ul_now_ns() - t0) / 1e9);
    return 0;
}

/* ------------------------------------------------------------ sink, respond */

static int ul_sink(int port, const char *path)
{
    static unsigned char buf[BATCH][2048];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    volatile uint64_t *count;
    unsigned first = 0;
    int fd = ul_socket(port, 0);
    int cf;

    if (fd == -1)
        return 1;
    cf = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (cf == -1 || ftruncate(cf, 4096) == -1) {
        fprintf(stderr, "udp_load: %s: %s\n", path, strerror(errno));
        return 1;
    }
    count = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, cf, 0);
    if (count == MAP_FAILED) {
        perror("udp_load: mmap");
        return 1;
    }
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = buf[i];
        iov[i].iov_len = sizeof(buf[i]);
        memset(&msgs[i], 0, sizeof(msgs[i]));
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    for (;;) {
        int got = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        uint64_t bytes = 0, odd = 0;

        if (got < 0) {
            if (errno == EINTR)
                continue;
            perror("udp_load: recvmmsg");
            return 1;
        }
        for (int i = 0; i < got; i++) {
            if (first == 0)
                first = msgs[i].msg_len;
            bytes += msgs[i].msg_len;
            odd += msgs[i].msg_len != first;
        }
        /* one writer; the reader may see the three fields from two batches, never torn */
        __atomic_store_n(&count[0], count[0] + (uint64_t)got, __ATOMIC_RELAXED);
        __atomic_store_n(&count[1], count[1] + bytes, __ATOMIC_RELAXED);
        __atomic_store_n(&count[2], count[2] + odd, __ATOMIC_RELAXED);
    }
}

static int ul_respond(int port)
{
    static unsigned char buf[BATCH][1500];
    static const unsigned char answer[16] = {
        0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x01, 0x2c, 0, 4, 192, 0, 2, 1   /* NAME A IN 300 */
    };
    struct mmsghdr msgs[BATCH], out[BATCH];
    struct sockaddr_in from[BATCH];
    struct iovec iov[BATCH], oiov[BATCH];
    int fd = ul_socket(port, 0);

    if (fd == -1)
        return 1;
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = buf[i];
        iov[i].iov_len = sizeof(buf[i]);
        memset(&msgs[i], 0, sizeof(msgs[i]));
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &from[i];
    }
    for (;;) {
        int got, n = 0;

        for (int i = 0; i < BATCH; i++)
            msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
        got = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            perror("udp_load: recvmmsg");
            return 1;
        }
        for (int i = 0; i < got; i++) {
            unsigned char *m = buf[i];
            int q = ul_dns_question_end(m, msgs[i].msg_len);

            if (q < 0 || (m[2] & 0x80) || q + (int)sizeof(answer) > (int)sizeof(buf[i]))
                continue;                           /* not a query we can answer: ignore */
            m[2] = (unsigned char)(0x84 | (m[2] & 0x01));   /* QR, AA, RD as asked */
            m[3] = 0;                               /* NOERROR */
            m[6] = 0, m[7] = 1;                     /* ANCOUNT */
            m[8] = m[9] = m[10] = m[11] = 0;        /* no authority, no additional */
            memcpy(m + q, answer, sizeof(answer));
            oiov[n].iov_base = m;
            oiov[n].iov_len = (size_t)q + sizeof(answer);
            memset(&out[n], 0, sizeof(out[n]));
            out[n].msg_hdr.msg_iov = &oiov[n];
            out[n].msg_hdr.msg_iovlen = 1;
            out[n].msg_hdr.msg_name = &from[i];
            out[n].msg_hdr.msg_namelen = msgs[i].msg_hdr.msg_namelen;
            n++;
        }
        for (int done = 0; done < n;) {
            int s = sendmmsg(fd, out + done, (unsigned)(n - done), 0);

            if (s <= 0)
                break;                              /* a reply lost here is the client's loss */
            done += s;
        }
    }
}

int main(int argc, char **argv)
{
    long port, a, b, c, d;

    if (argc >= 3 && ul_parse(argv[2], 1, 65535, &port) == 0) {
        if (strcmp(argv[1], "dns") == 0 && argc == 7 && ul_parse(argv[3], 1, 10000000, &a) == 0
            && ul_parse(argv[4], 1, 600, &b) == 0 && ul_parse(argv[5], 1, MAX_FLOWS, &c) == 0)
            return ul_dns((int)port, a, b, c, argv[6]);
        if (strcmp(argv[1], "dnsloop") == 0 && argc == 6 && ul_parse(argv[3], 1, 600, &a) == 0
            && ul_parse(argv[4], 1, MAX_FLOWS, &b) == 0)
            return ul_dnsloop((int)port, a, b, argv[5]);
        if (strcmp(argv[1], "flood") == 0 && argc == 7
            && ul_parse(argv[3], 64, 65000, &a) == 0 && ul_parse(argv[4], 1, 10000000, &b) == 0
            && ul_parse(argv[5], 1, 600, &c) == 0 && ul_parse(argv[6], 1, MAX_FLOWS, &d) == 0)
            return ul_flood((int)port, a, b, c, d);
        if (strcmp(argv[1], "sink") == 0 && argc == 4)
            return ul_sink((int)port, argv[3]);
        if (strcmp(argv[1], "respond") == 0 && argc == 3)
            return ul_respond((int)port);
    }
    fprintf(stderr, "usage: udp_load dns PORT RATE SECS FLOWS NAME\n"
                    "       udp_load dnsloop PORT SECS FLOWS NAME\n"
                    "       udp_load flood PORT SIZE RATE SECS FLOWS\n"
                    "       udp_load sink PORT COUNTFILE\n"
                    "       udp_load respond PORT\n");
    return 2;
}
