/*
 * control.c - the running process's side of a hand-over (takeover.c has
 * the protocol and the new process's side): the control socket ([global]
 * control_socket), the one hand-over it serves at a time, and SIGUSR2,
 * which starts the new process that asks for it.
 *
 * Main thread. The answer is sent from main's loop with blocking sends
 * bounded by LB_TAKEOVER_IO_S: a hand-over is an operator's action, and
 * the data path runs on the workers meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "daemon.h"
#include "handover.h"
#include "handover_int.h"
#include "reload.h"
#include "state.h"
#include "tier.h"

/* The old side: the control socket and the one hand-over it serves. */
struct lb_control {
    struct lb_daemon *d;
    char *path;
    struct evconnlistener *listener;
    int peer;                           /* the new process, or -1 */
    struct event *peer_ev;              /* its "go", or its end */
    struct lb_handover_admin admin;     /* main's: the admin port's socket */
};

static void lb_control_peer_close(struct lb_control *c);

/* Sends text's whole lines in messages of at most LB_TAKEOVER_MSG_MAX. */
static int
lb_control_send_lines(int fd, const char *text, size_t len)
{
    static const char head[] = "state\n";
    char *msg = malloc(LB_TAKEOVER_MSG_MAX);
    size_t at = 0;
    int rc = msg != NULL ? 0 : -1;

    while (rc == 0 && at < len) {
        size_t used = sizeof(head) - 1;

        memcpy(msg, head, used);
        while (at < len) {
            const char *nl = memchr(text + at, '\n', len - at);
            size_t k = (nl != NULL ? (size_t)(nl - (text + at)) : len - at) + 1;

            if (used + k > LB_TAKEOVER_MSG_MAX)
                break;                  /* a line is far shorter than that */
            memcpy(msg + used, text + at, k);
            used += k;
            at += k;
        }
        rc = lb_takeover_send(fd, msg, used, NULL, 0);
    }
    free(msg);
    return rc;
}

/* The heartbeats that keep a server out or warning (lb_takeover_beat_kind's
 * lines, "beat POOL NAME warn|fail EXPIRED"): a heartbeat may lower a
 * server's health, and the new process must not raise it by forgetting the
 * report. malloc'd. */
static char *
lb_control_beats(struct lb_daemon *d, size_t *len)
{
    struct lb_text t = { 0 };
    int rc = 0;

    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; rc == 0 && i < d->gen->nservers; i++) {
        const struct lb_server *srv = d->gen->servers[i];
        const struct lb_backend *b = srv->b;
        struct lb_takeover_beat l = { .beat = b->beat, .is_expired = b->is_beat_expired };
        char *at;

        if (srv->pool->conf->heartbeat_ttl_ms == 0 ||
            (b->beat != BAL_BEAT_WARN && b->beat != BAL_BEAT_FAIL))
            continue;
        snprintf(l.pool, sizeof(l.pool), "%s", srv->pool->conf->name);
        snprintf(l.name, sizeof(l.name), "%s", srv->conf->name);
        if ((at = lb_text_room(&t, LB_STATE_LINE_MAX)) == NULL)
            rc = -1;
        else
            t.len += bal_line_format(at, LB_STATE_LINE_MAX, &lb_takeover_beat_kind, &l);
    }
    pthread_mutex_unlock(&d->state_lock);
    return lb_text_take(&t, len);
}

/* Everything the new process needs, in order; -1 on a send failure. */
static int
lb_control_send_all(struct lb_control *c)
{
    struct lb_daemon *d = c->d;
    const struct lb_gen *g = d->gen;
    char msg[128];
    char *state, *members, *beats;
    size_t nstate, lstate, lmembers, lbeats;
    int fd = c->peer, rc = 0, afd;

    snprintf(msg, sizeof(msg), "lb-takeover 1 %s", LB_VERSION);
    if (lb_takeover_send_text(fd, msg) == -1)
        return -1;
    for (size_t i = 0; rc == 0 && i < g->conf->nfrontends; i++) {
        const struct lb_listen *l = g->frontends[i].listen;
        bool is_first = true;

        for (size_t k = 0; k < i && is_first; k++)
            is_first = g->frontends[k].listen != l;    /* one set per address */
        for (size_t at = 0; is_first && rc == 0 && at < l->nfds; at += LB_TAKEOVER_FDS_MAX) {
            size_t n = l->nfds - at < LB_TAKEOVER_FDS_MAX ? l->nfds - at : LB_TAKEOVER_FDS_MAX;

            snprintf(msg, sizeof(msg), "listen %zu", i);
            rc = lb_takeover_send(fd, msg, strlen(msg), &l->fds[at], n);
        }
    }
    if (rc == 0 && d->admin != NULL && (afd = c->admin.fd(d)) >= 0)
        rc = lb_takeover_send(fd, "admin", 5, &afd, 1);
    if (rc == 0) {
        int cfd = evconnlistener_get_fd(c->listener);

        rc = lb_takeover_send(fd, "control", 7, &cfd, 1);
    }
    if (rc == -1)
        return -1;
    state = lb_state_lines(d, true, &lstate, &nstate);
    members = lb_members_text(d, &lmembers);
    beats = lb_control_beats(d, &lbeats);
    rc = state != NULL && members != NULL && beats != NULL ? 0 : -1;
    if (rc == 0)
        rc = lb_control_send_lines(fd, state, lstate);
    if (rc == 0)
        rc = lb_control_send_lines(fd, members, lmembers);
    if (rc == 0)
        rc = lb_control_send_lines(fd, beats, lbeats);
    free(state);
    free(members);
    free(beats);
    if (rc == 0)
        rc = lb_takeover_send_text(fd, "end");
    return rc;
}

/* "go": the new process serves. This one stops accepting, hands the
 * state file to it and drains. */
static void
lb_control_handed_over(struct lb_control *c)
{
    struct lb_daemon *d = c->d;

    lb_log(CONF_LOG_INFO, "takeover", "role=old active=%u shutdown_timeout_ms=%llu",
           atomic_load(&d->limit.active),
           (unsigned long long)d->gen->conf->global.shutdown_timeout_ms);
    d->is_handed_over = true;           /* the state file and the path are
                                           the new process's now */
    lb_tier_handed_over(d);
    (void)lb_takeover_send_text(c->peer, "bye");
    lb_control_peer_close(c);
    evconnlistener_free(c->listener);   /* our copy of the control socket */
    c->listener = NULL;
    c->admin.unlisten(d);
    lb_tier_stop(d, "takeover");
}

static void
lb_control_on_peer(evutil_socket_t fd, short what, void *arg)
{
    struct lb_control *c = arg;
    char buf[64];
    int fds[LB_TAKEOVER_FDS_MAX];
    size_t nfds;
    ssize_t n = (what & EV_READ) ? lb_takeover_recv(c->peer, buf, sizeof(buf), fds, &nfds) : -1;

    for (size_t i = 0; n >= 0 && i < nfds; i++)
        close(fds[i]);
    if (n > 0 && strcmp(buf, "go") == 0 && !lb_tier_is_stopping(c->d)) {
        lb_control_handed_over(c);
        return;
    }
    lb_log(CONF_LOG_WARN, "takeover_aborted", "reason=%s",
           (what & EV_TIMEOUT) ? "\"no go from the new process in time\""
           : n == 0 ? "\"the new process went away\"" : "\"unexpected message\"");
    lb_control_peer_close(c);
}

static void
lb_control_peer_close(struct lb_control *c)
{
    if (c->peer_ev != NULL)
        event_free(c->peer_ev);
    c->peer_ev = NULL;
    if (c->peer >= 0)
        close(c->peer);
    c->peer = -1;
}

static bool
lb_control_peer_allowed(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
           (cred.uid == 0 || cred.uid == geteuid());
}

static void
lb_control_on_accept(struct evconnlistener *listener, evutil_socket_t fd,
                     struct sockaddr *sa, int salen, void *arg)
{
    struct lb_control *c = arg;
    struct lb_daemon *d = c->d;
    struct timeval wait = { .tv_sec = LB_TAKEOVER_WAIT_S };
    char buf[64];
    int fds[LB_TAKEOVER_FDS_MAX];
    size_t nfds = 0;
    const char *refusal = NULL;
    ssize_t n;

    if (!lb_control_peer_allowed(fd))
        refusal = "another user";
    else if (c->peer >= 0)
        refusal = "a hand-over is in progress";
    else if (lb_tier_is_leaving(d))
        refusal = "stopping";
    if (refusal == NULL) {
        /* The accepted socket is non-blocking (libevent's listener): this
         * exchange blocks, with a bound, and the wait for "go" does not. */
        (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        lb_takeover_timeouts(fd);
        n = lb_takeover_recv(fd, buf, sizeof(buf), fds, &nfds);
        for (size_t i = 0; n >= 0 && i < nfds; i++)
            close(fds[i]);
        if (n <= 0 || strcmp(buf, "takeover 1") != 0)
            refusal = "not a takeover request";
    }
    if (refusal != NULL) {
        char msg[96];

        lb_log(CONF_LOG_WARN, "takeover_refused", "reason=\"%s\"", refusal);
        snprintf(msg, sizeof(msg), "refused %s", refusal);
        (void)lb_takeover_send_text(fd, msg);
        close(fd);
        return;
    }
    c->peer = fd;
    lb_log(CONF_LOG_INFO, "takeover_asked", "active=%u", atomic_load(&d->limit.active));
    if (lb_control_send_all(c) == -1) {
        lb_log(CONF_LOG_WARN, "takeover_aborted", "reason=\"send: %s\"", strerror(errno));
        lb_control_peer_close(c);
        return;
    }
    c->peer_ev = event_new(d->base, fd, EV_READ, lb_control_on_peer, c);
    if (c->peer_ev == NULL || event_add(c->peer_ev, &wait) == -1) {
        lb_log(CONF_LOG_WARN, "takeover_aborted", "reason=\"out of memory\"");
        lb_control_peer_close(c);
    }
}

/* A socket at path that answers belongs to a running lb: not ours to
 * replace. One that refuses is a leftover of a process that died. */
static int
lb_control_bind(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct stat st;
    mode_t mask;

    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    if (fd < 0) {
        snprintf(err, errlen, "control_socket %s: %s", path, strerror(errno));
        return -1;
    }
    if (lstat(path, &st) == 0) {
        int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        bool is_live = probe >= 0 && S_ISSOCK(st.st_mode) &&
                       connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0;

        if (probe >= 0)
            close(probe);
        if (is_live || !S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "control_socket %s: %s", path,
                     is_live ? "another lb answers there (lb -x takes over from it)"
                             : "exists and is not a socket");
            close(fd);
            return -1;
        }
        unlink(path);
    }
    mask = umask(077);                  /* the socket is created 0600 */
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 || listen(fd, 4) == -1) {
        snprintf(err, errlen, "control_socket %s: %s", path, strerror(errno));
        umask(mask);
        close(fd);
        return -1;
    }
    umask(mask);
    return fd;
}

int
lb_control_start(struct lb_daemon *d, const struct lb_handover_admin *admin, char *err,
                 size_t errlen)
{
    const char *path = d->gen->conf->global.control_socket;
    struct lb_control *c;
    int fd;

    if (path[0] == '\0')
        return 0;
    /* A hand-over's control socket is the same socket, at the same path. */
    if ((fd = lb_takeover_control_fd(d)) < 0 && (fd = lb_control_bind(path, err, errlen)) < 0)
        return -1;
    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->path = strdup(path)) == NULL) {
        free(c);
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    c->d = d;
    c->peer = -1;
    c->admin = *admin;
    c->listener = evconnlistener_new(d->base, lb_control_on_accept, c,
                                     LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
    if (c->listener == NULL) {
        close(fd);
        free(c->path);
        free(c);
        snprintf(err, errlen, "control_socket %s: cannot listen", path);
        return -1;
    }
    d->control = c;
    return 0;
}

void
lb_control_stop(struct lb_daemon *d)
{
    struct lb_control *c = d->control;

    if (c == NULL)
        return;
    lb_control_peer_close(c);
    if (c->listener != NULL)
        evconnlistener_free(c->listener);
    if (!d->is_handed_over)
        unlink(c->path);                /* after a hand-over it is the new one's */
    free(c->path);
    free(c);
    d->control = NULL;
}

void
lb_takeover_spawn(struct lb_daemon *d)
{
    const char *why = NULL;
    char config[PATH_MAX];
    pid_t child;
    int status = 0;

    if (d->control == NULL)
        why = "control_socket is not set";
    else if (d->control->peer >= 0)
        why = "a hand-over is in progress";
    else if (lb_tier_is_leaving(d))
        why = "stopping";
    else if (d->exe[0] == '\0' || realpath(d->path, config) == NULL)
        why = "cannot name the binary or the config file";
    if (why != NULL) {
        lb_log(CONF_LOG_WARN, "upgrade_refused", "reason=\"%s\"", why);
        return;
    }
    lb_log(CONF_LOG_INFO, "upgrade", "binary=%s config=%s", d->exe, config);
    /* Twice forked: the new process is nobody's child here (no zombie to
     * reap if it fails) and stays in this process's cgroup, where systemd
     * takes its MAINPID. Between fork and exec only async-signal-safe
     * calls: descriptors beyond stderr are not the new process's. */
    child = fork();
    if (child == 0) {
        char *argv[] = { d->exe, "-c", config, "-x", NULL };
        pid_t grandchild = fork();

        if (grandchild != 0)
            _exit(grandchild < 0 ? 1 : 0);
        close_range(3, ~0U, 0);
        execv(d->exe, argv);
        _exit(127);
    }
    while (child > 0 && waitpid(child, &status, 0) == -1 && errno == EINTR)
        ;
    if (child < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        lb_log(CONF_LOG_WARN, "upgrade_refused", "reason=\"cannot start a process\"");
}
