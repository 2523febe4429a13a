/*
 * takeover.c - lb -x: a new process (a new binary, a new config) takes over
 * from the running one without a refused connection and without forgetting
 * what the running one knows of its servers.
 *
 * The running process listens on [global] control_socket, a UNIX socket
 * of type SOCK_SEQPACKET (one message per send, descriptors attached to
 * it), mode 0600, answering only its own user or root. The new process
 * connects and asks ("takeover 1"); the old one answers, a message each:
 *
 *   lb-takeover 1 VERSION
 *   listen SET                 + sockets of one frontend address (SCM_RIGHTS)
 *   admin                      + the admin port's socket
 *   control                    + the control socket itself
 *   state                      + lines: the state file's body (state.c),
 *                                the members (members.c) and the
 *                                heartbeats that lower a server, in
 *                                messages of at most LB_TAKEOVER_MSG_MAX
 *   end
 *
 * The new process builds its first generation on those sockets, with the
 * members in its pools and the servers in their states (their first probe
 * spread over the interval, not at once), starts, and once it serves says
 * "go". The old one then stops accepting: its copies of the sockets are
 * closed, the sockets themselves, and the connections in their queues, live
 * on in the new process. It answers "bye" and drains as after SIGTERM, for
 * up to shutdown_timeout. A new process that fails before "go" only goes
 * away: the old one serves on as if nothing had been asked.
 *
 * This file: the messages, and the new process's side; control.c has the
 * old process's (the control socket). Main thread on both sides.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon.h"
#include "handover.h"
#include "handover_int.h"
#include "reload.h"
#include "state.h"

/* What a hand-over brought to the new process. */
struct lb_takeover {
    int fd;                             /* to the old process, until "bye" */
    char version[64];                   /* the old process's */
    struct lb_listen **listens;         /* one per frontend address */
    size_t nlistens;
    int admin_fd, control_fd;           /* -1 once taken, or none came */
    int pending[256];                   /* the sockets of set pending_set, */
    size_t npending;                    /* which may come in more messages */
    unsigned long pending_set;
    char *lines;                        /* state and member lines */
    size_t len;
};

/* ------------------------------------------------------------ messages */

void
lb_takeover_timeouts(int fd)
{
    struct timeval tv = { .tv_sec = LB_TAKEOVER_IO_S };

    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int
lb_takeover_send(int fd, const void *buf, size_t len, const int *fds, size_t nfds)
{
    union {
        char buf[CMSG_SPACE(LB_TAKEOVER_FDS_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

    if (nfds > 0) {
        struct cmsghdr *c;

        memset(&u, 0, sizeof(u));
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    while (sendmsg(fd, &msg, MSG_NOSIGNAL) == -1) {
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

int
lb_takeover_send_text(int fd, const char *text)
{
    return lb_takeover_send(fd, text, strlen(text), NULL, 0);
}

ssize_t
lb_takeover_recv(int fd, char *buf, size_t len, int *fds, size_t *nfds)
{
    union {
        char buf[CMSG_SPACE(LB_TAKEOVER_FDS_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = { .iov_base = buf, .iov_len = len - 1 };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                          .msg_controllen = sizeof(u.buf) };
    ssize_t n;

    *nfds = 0;
    do {
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    } while (n == -1 && errno == EINTR);
    if (n < 0)
        return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

            memcpy(fds + *nfds, CMSG_DATA(c), k * sizeof(int));
            *nfds += k;
        }
    }
    buf[n] = '\0';
    if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
        for (size_t i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = 0;
        errno = EMSGSIZE;
        return -1;
    }
    return n;
}

/* ------------------------------------------------- the new process's side */

void
lb_takeover_free(struct lb_takeover *t)
{
    if (t == NULL)
        return;
    if (t->fd >= 0)
        close(t->fd);
    for (size_t i = 0; i < t->npending; i++)
        close(t->pending[i]);
    for (size_t i = 0; i < t->nlistens; i++)
        lb_listen_unref(t->listens[i]);
    free(t->listens);
    if (t->admin_fd >= 0)
        close(t->admin_fd);
    if (t->control_fd >= 0)
        close(t->control_fd);
    free(t->lines);
    free(t);
}

static int
lb_takeover_add_lines(struct lb_takeover *t, const char *text, size_t len)
{
    char *grown = realloc(t->lines, t->len + len + 1);

    if (grown == NULL)
        return -1;
    memcpy(grown + t->len, text, len);
    t->len += len;
    grown[t->len] = '\0';
    t->lines = grown;
    return 0;
}

/* The gathered sockets of one set, adopted as the nworkers of a listen set. */
static int
lb_takeover_flush(struct lb_takeover *t, size_t nworkers, char *err, size_t errlen)
{
    struct lb_listen **grown, *l;
    size_t n = t->npending;

    if (n == 0)
        return 0;
    t->npending = 0;
    grown = realloc(t->listens, (t->nlistens + 1) * sizeof(*grown));
    if (grown == NULL) {
        snprintf(err, errlen, "out of memory");
        for (size_t i = 0; i < n; i++)
            close(t->pending[i]);
        return -1;
    }
    t->listens = grown;
    if ((l = lb_listen_adopt(t->pending, n, nworkers, err, errlen)) == NULL)
        return -1;
    if (n != nworkers)
        lb_log(CONF_LOG_WARN, "takeover_workers", "addr=%s sockets=%zu workers=%zu "
               "detail=\"workers changed: sockets are bound or closed to match\"",
               l->addr.text, n, nworkers);
    t->listens[t->nlistens++] = l;
    return 0;
}

/* One message of the answer into t: 1 at "end", 0 for more, -1 with err. */
static int
lb_takeover_take(struct lb_takeover *t, char *msg, size_t len, int *fds, size_t nfds,
                 size_t nworkers, char *err, size_t errlen)
{
    static const char state[] = "state\n";
    unsigned long set;
    char *end;

    if (strncmp(msg, "listen ", 7) == 0 && nfds > 0 &&
        (set = strtoul(msg + 7, &end, 10), *end == '\0')) {
        /* A set of more than LB_TAKEOVER_FDS_MAX sockets comes in more
         * messages: gathered, then adopted whole. */
        if ((t->npending > 0 && set != t->pending_set &&
             lb_takeover_flush(t, nworkers, err, errlen) == -1) ||
            t->npending + nfds > sizeof(t->pending) / sizeof(t->pending[0])) {
            if (t->npending + nfds > sizeof(t->pending) / sizeof(t->pending[0]))
                snprintf(err, errlen, "more sockets than workers can be");
            goto close_fds;
        }
        memcpy(t->pending + t->npending, fds, nfds * sizeof(int));
        t->npending += nfds;
        t->pending_set = set;
        return 0;
    }
    if (lb_takeover_flush(t, nworkers, err, errlen) == -1)
        goto close_fds;
    if (strcmp(msg, "admin") == 0 && nfds == 1 && t->admin_fd < 0) {
        t->admin_fd = fds[0];
        return 0;
    }
    if (strcmp(msg, "control") == 0 && nfds == 1 && t->control_fd < 0) {
        t->control_fd = fds[0];
        return 0;
    }
    if (nfds == 0 && strncmp(msg, state, sizeof(state) - 1) == 0) {
        if (lb_takeover_add_lines(t, msg + sizeof(state) - 1, len - (sizeof(state) - 1)) == 0)
            return 0;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (nfds == 0 && strcmp(msg, "end") == 0)
        return 1;
    snprintf(err, errlen, "unexpected message from the running lb: %.60s", msg);
close_fds:
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
    return -1;
}

struct lb_takeover *
lb_takeover_receive(const char *path, size_t nworkers, char *err, size_t errlen)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    struct lb_takeover *t = calloc(1, sizeof(*t));
    char *msg = malloc(LB_TAKEOVER_MSG_MAX + 1);
    int fds[LB_TAKEOVER_FDS_MAX];
    size_t nfds;
    ssize_t n;
    int rc = 0;

    if (t == NULL || msg == NULL) {
        snprintf(err, errlen, "out of memory");
        free(t);
        free(msg);
        return NULL;
    }
    t->admin_fd = t->control_fd = -1;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    t->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (t->fd < 0 || connect(t->fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
        snprintf(err, errlen, "control_socket %s: %s (is lb running there?)", path,
                 strerror(errno));
        goto fail;
    }
    lb_takeover_timeouts(t->fd);
    if (lb_takeover_send_text(t->fd, "takeover 1") == -1 ||
        (n = lb_takeover_recv(t->fd, msg, LB_TAKEOVER_MSG_MAX + 1, fds, &nfds)) <= 0) {
        snprintf(err, errlen, "control_socket %s: %s", path,
                 errno ? strerror(errno) : "closed without an answer");
        goto fail;
    }
    if (nfds > 0 || sscanf(msg, "lb-takeover 1 %63s", t->version) != 1) {
        snprintf(err, errlen, "control_socket %s: the running lb answered \"%.80s\"", path,
                 msg);
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        goto fail;
    }
    while (rc == 0) {
        n = lb_takeover_recv(t->fd, msg, LB_TAKEOVER_MSG_MAX + 1, fds, &nfds);
        if (n <= 0) {
            snprintf(err, errlen, "control_socket %s: %s", path,
                     n == 0 ? "the running lb closed the hand-over" : strerror(errno));
            goto fail;
        }
        rc = lb_takeover_take(t, msg, (size_t)n, fds, nfds, nworkers, err, errlen);
    }
    if (rc == -1)
        goto fail;
    free(msg);
    return t;
fail:
    free(msg);
    lb_takeover_free(t);
    return NULL;
}

/* Calls fn on each line of t that starts with prefix. */
static int
lb_takeover_each_line(const struct lb_takeover *t, const char *prefix,
                      int (*fn)(const char *line, void *arg), void *arg)
{
    size_t plen = strlen(prefix);

    for (const char *at = t->lines; at != NULL && *at != '\0';) {
        const char *nl = strchr(at, '\n');
        size_t len = nl != NULL ? (size_t)(nl - at) : strlen(at);
        char line[LB_STATE_LINE_MAX + 1];

        if (len < sizeof(line) && strncmp(at, prefix, plen) == 0) {
            memcpy(line, at, len);
            line[len] = '\0';
            if (fn(line, arg) == -1)
                return -1;
        }
        at = nl != NULL ? nl + 1 : at + len;
    }
    return 0;
}

struct lb_takeover_members_arg {
    struct lb_daemon *d;
    char *err;
    size_t errlen;
};

static int
lb_takeover_member_line(const char *line, void *arg)
{
    struct lb_takeover_members_arg *a = arg;

    return lb_members_adopt(a->d, line, a->err, a->errlen);
}

int
lb_takeover_members(struct lb_daemon *d, char *err, size_t errlen)
{
    struct lb_takeover_members_arg a = { d, err, errlen };

    if (lb_takeover_each_line(d->takeover, "member ", lb_takeover_member_line, &a) == -1 ||
        lb_takeover_each_line(d->takeover, "weight ", lb_takeover_member_line, &a) == -1)
        return -1;
    return 0;
}

struct lb_takeover_state_arg {
    struct bal_saved *saved;
    size_t n, cap, bad;
};

static int
lb_takeover_state_line(const char *line, void *arg)
{
    struct lb_takeover_state_arg *a = arg;
    char err[128];

    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        struct bal_saved *grown = realloc(a->saved, cap * sizeof(*grown));

        if (grown == NULL)
            return -1;
        a->saved = grown;
        a->cap = cap;
    }
    if (bal_saved_parse(line, &a->saved[a->n], err, sizeof(err)) == -1)
        a->bad++;                       /* the old one wrote it: not expected */
    else
        a->n++;
    return 0;
}

/* beat POOL NAME warn|fail EXPIRED (bal_lines.h): the heartbeats that
 * lower a server, formatted by the old process (control.c), read here.
 * pass and off are not sent: the new process starts from pass. */
static const char *const lb_takeover_beats[] = {
    [BAL_BEAT_WARN] = "warn", [BAL_BEAT_FAIL] = "fail",
};

static const struct bal_line_field lb_takeover_beat_fields[] = {
    BAL_LINE_WORD_FIELD("pool", struct lb_takeover_beat, pool),
    BAL_LINE_WORD_FIELD("name", struct lb_takeover_beat, name),
    BAL_LINE_ENUM_FIELD("beat", struct lb_takeover_beat, beat, lb_takeover_beats),
    BAL_LINE_UINT_FIELD("expired", struct lb_takeover_beat, is_expired, 0, 1),
};
const struct bal_line_kind lb_takeover_beat_kind =
    BAL_LINE_KIND("beat", lb_takeover_beat_fields);

/* A heartbeat's report, kept: its TTL starts anew in this process (the
 * tick's first look), so an expired one stays failed until a report. A
 * line that does not parse, or names no server with heartbeats here, is
 * passed over: the server starts from pass. */
static int
lb_takeover_beat_line(const char *line, void *arg)
{
    struct lb_gen *g = arg;
    struct lb_takeover_beat l = { 0 };
    struct lb_server *srv;
    char err[128];

    if (bal_line_parse(line, &lb_takeover_beat_kind, &l, err, sizeof(err)) == -1 ||
        (srv = lb_gen_find_server(g, l.pool, l.name)) == NULL ||
        srv->pool->conf->heartbeat_ttl_ms == 0)
        return 0;
    srv->b->beat = l.beat;
    srv->b->is_beat_expired = l.beat == BAL_BEAT_FAIL && l.is_expired;
    return 0;
}

void
lb_takeover_state(struct lb_daemon *d, struct lb_gen *g)
{
    struct lb_takeover_state_arg a = { 0 };
    size_t applied = 0;

    if (lb_takeover_each_line(d->takeover, "server ", lb_takeover_state_line, &a) == 0)
        applied = lb_state_apply(g, a.saved, a.n, true);
    (void)lb_takeover_each_line(d->takeover, "beat ", lb_takeover_beat_line, g);
    lb_log(CONF_LOG_INFO, "takeover_state", "from_version=%s listen_sets=%zu servers=%zu "
           "applied=%zu unreadable=%zu", d->takeover->version, d->takeover->nlistens, a.n,
           applied, a.bad);
    free(a.saved);
}

struct lb_listen *const *
lb_takeover_listens(const struct lb_daemon *d, size_t *n)
{
    *n = d->takeover != NULL ? d->takeover->nlistens : 0;
    return d->takeover != NULL ? d->takeover->listens : NULL;
}

int
lb_takeover_control_fd(struct lb_daemon *d)
{
    struct lb_takeover *t = d->takeover;
    int fd = t != NULL ? t->control_fd : -1;

    if (t != NULL)
        t->control_fd = -1;             /* taken */
    return fd;
}

int
lb_takeover_admin_fd(struct lb_daemon *d, const struct conf_addr *addr)
{
    struct lb_takeover *t = d->takeover;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int fd;

    if (t == NULL || t->admin_fd < 0)
        return -1;
    fd = t->admin_fd;
    t->admin_fd = -1;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && len == addr->len &&
        memcmp(&ss, &addr->ss, len) == 0)
        return fd;
    close(fd);                          /* the admin port moved: bound anew */
    return -1;
}

void
lb_takeover_finish(struct lb_daemon *d)
{
    struct lb_takeover *t = d->takeover;
    char buf[64];
    int fds[LB_TAKEOVER_FDS_MAX];
    size_t nfds = 0;
    ssize_t n;

    if (t == NULL)
        return;
    n = lb_takeover_send_text(t->fd, "go") == 0
            ? lb_takeover_recv(t->fd, buf, sizeof(buf), fds, &nfds) : -1;
    for (size_t i = 0; n >= 0 && i < nfds; i++)
        close(fds[i]);
    if (n > 0 && strcmp(buf, "bye") == 0) {
        char state[64];

        lb_log(CONF_LOG_INFO, "takeover", "role=new from_version=%s", t->version);
        /* Under systemd (NotifyAccess=all) this process is the service's
         * main one from now on. */
        snprintf(state, sizeof(state), "MAINPID=%d\nREADY=1", (int)getpid());
        if (lb_net_notify(state) == -1)
            lb_log(CONF_LOG_WARN, "notify_failed", "error=\"%s\"", strerror(errno));
    } else
        lb_log(CONF_LOG_WARN, "takeover_unconfirmed", "detail=\"the old process did not "
               "confirm that it stopped accepting; both may serve until it ends\"");
    d->takeover = NULL;
    lb_takeover_free(t);
}
