/*
 * main.c - command line, start-up, signals and shutdown.
 *
 *   lb -c FILE      run in the foreground, log to stderr
 *   lb -c FILE -x   the same, taking over from the lb running on the
 *                   config's control_socket (an upgrade; takeover.c)
 *   lb -t -c FILE   check the config: "configuration OK" and 0, or one
 *                   "FILE:LINE: message" per problem and 1
 *   lb -r -c FILE   ask the lb running with FILE to reload it, through
 *                   its admin port: 0 when it did, 1 with the reason
 *
 * The main thread owns the daemon object, the current generation and the
 * signal events; the workers do all the data-path work.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "admin.h"
#include "daemon.h"
#include "data.h"
#include "handover.h"
#include "reload.h"
#include "state.h"
#include "tier.h"

/* Descriptors kept back when comparing max_connections with the fd limit:
 * listeners, event bases, logs, and the admin port's connections (which
 * it never exceeds, so it cannot take what the data path counts on). */
#define LB_FD_RESERVE (64 + LB_ADMIN_MAX_CONNS)

static void
lb_usage(FILE *out)
{
    fprintf(out,
            "usage: lb [-t | -r | -x] -c FILE\n"
            "  -c, --config FILE  configuration file (INI)\n"
            "  -t, --test         check the configuration and exit\n"
            "  -r, --reload       ask the lb running with FILE to reload it (POST /reload)\n"
            "  -x, --takeover     take over from the lb running on control_socket\n"
            "  -v, --version      print the version and exit\n"
            "  -h, --help         this help\n");
}

/* What the workers tell main: one switched generation or ended, or client
 * traffic met an error at a server (outlier detection). (The admin port's
 * orders come on a mailbox of their own: admin_order.c.) */
static void
lb_main_on_msgs(void *msgs, size_t n, void *arg)
{
    struct lb_daemon *d = arg;
    const struct lb_main_msg *m = msgs;

    for (size_t i = 0; i < n; i++) {
        switch (m[i].kind) {
        case LB_MAIN_SWITCHED:
            lb_reload_on_switched(d, m[i].worker, m[i].number);
            break;
        case LB_MAIN_WORKER_EXIT:
            if (--d->workers_running == 0)
                event_base_loopbreak(d->base);
            break;
        case LB_MAIN_LIVE_ERROR:
            pthread_mutex_lock(&d->state_lock);
            lb_server_live_error(d, m[i].server, (enum bal_outlier_kind)m[i].error_kind,
                                 m[i].number, m[i].began);
            pthread_mutex_unlock(&d->state_lock);
            break;
        }
    }
}

/* A decision gave a server's open connections a drain deadline: the
 * workers scan their sessions (state/ calls this through lb_state_data). */
static void
lb_main_drain_scan(struct lb_daemon *d)
{
    lb_workers_post(d, LB_WORKER_DRAIN);
}

static void
lb_main_on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
    lb_tier_on_signal(arg, (int)sig);
}

static void
lb_main_on_hup(evutil_socket_t sig, short what, void *arg)
{
    lb_reload_signal(arg);
}

static void
lb_main_on_usr2(evutil_socket_t sig, short what, void *arg)
{
    lb_takeover_spawn(arg);
}

static void
lb_main_log_start(const struct lb_daemon *d, const char *path, uint64_t fd_limit)
{
    const struct conf *c = d->gen->conf;

    lb_log(CONF_LOG_INFO, "start", "version=%s config=%s workers=%zu max_connections=%u fd_limit=%llu",
           LB_VERSION, path, d->nworkers, c->global.max_connections,
           (unsigned long long)fd_limit);
    /* Each session holds two descriptors and each health probe in flight
     * one (all of them at once at start): warn when the cap cannot be met. */
    size_t nchecked = 0;

    for (size_t i = 0; i < d->gen->nservers; i++)
        nchecked += (d->gen->servers[i]->pool->conf->check != CONF_CHECK_NONE) +
                    (d->gen->servers[i]->conf->agent_port != 0);    /* its agent's */
    if ((uint64_t)c->global.max_connections * 2 + nchecked + LB_FD_RESERVE > fd_limit)
        lb_log(CONF_LOG_WARN, "fd_limit_low",
               "max_connections=%u checked_servers=%zu fd_limit=%llu detail=\"each connection needs 2 descriptors and each health probe 1; accepts pause at the fd limit\"",
               c->global.max_connections, nchecked, (unsigned long long)fd_limit);
    /* Workers beyond the CPUs take turns on them: each wake-up of a
     * sleeping one is a context switch (measured, 2 workers on 1 CPU: 4.5
     * times the switches of HAProxy's 2 threads, 7% to 12% more CPU per
     * connection and per request than 1 worker). */
    if (d->nworkers > d->ncpus)
        lb_log(CONF_LOG_WARN, "workers_over_cpus",
               "workers=%zu cpus=%u detail=\"workers beyond the CPUs lb may run on take turns and cost CPU; workers = 0 runs one per CPU\"",
               d->nworkers, d->ncpus);
    for (size_t i = 0; i < c->nfrontends; i++)
        lb_log(CONF_LOG_INFO, "listen", "frontend=%s addr=%s pool=%s routes=%zu",
               c->frontends[i].name, c->frontends[i].listen.text,
               c->frontends[i].pool_name != NULL ? c->frontends[i].pool_name : "-",
               c->frontends[i].routes.n);
}

/* [global] user and group: started as root, lb binds its ports (and the
 * admin port and control socket), then runs as user (its group, or group)
 * with that user's groups only. Before the workers start; glibc changes
 * every thread's IDs. A reload afterwards binds as that user: ports below
 * 1024 are refused (README). */
static int
lb_main_drop_privileges(const struct conf_global *g, char *err, size_t errlen)
{
    const struct passwd *pw;
    const struct group *gr = NULL;
    gid_t gid;

    if (g->user[0] == '\0' && g->group[0] == '\0')
        return 0;
    errno = 0;
    if (g->user[0] != '\0' && (pw = getpwnam(g->user)) == NULL) {
        snprintf(err, errlen, "user = %s: %s", g->user, errno ? strerror(errno) : "no such user");
        return -1;
    }
    if (g->user[0] == '\0' && (pw = getpwuid(geteuid())) == NULL) {
        snprintf(err, errlen, "group = %s: uid %u has no user entry to take groups from",
                 g->group, (unsigned)geteuid());
        return -1;
    }
    if (g->group[0] != '\0' && (gr = getgrnam(g->group)) == NULL) {
        snprintf(err, errlen, "group = %s: %s", g->group,
                 errno ? strerror(errno) : "no such group");
        return -1;
    }
    gid = gr != NULL ? gr->gr_gid : pw->pw_gid;
    if (geteuid() != 0) {
        if (pw->pw_uid == geteuid() && gid == getegid())
            return 0;                   /* already so */
        snprintf(err, errlen, "user = %s: lb runs as uid %u, not root, and cannot change user",
                 g->user[0] ? g->user : pw->pw_name, (unsigned)geteuid());
        return -1;
    }
    /* The control socket is the user's: an upgrade (SIGUSR2) starts the
     * new process as that user, and it must connect. */
    if (g->control_socket[0] != '\0' && chown(g->control_socket, pw->pw_uid, gid) == -1) {
        snprintf(err, errlen, "control_socket %s: %s", g->control_socket, strerror(errno));
        return -1;
    }
    if ((g->user[0] != '\0' ? initgroups(pw->pw_name, gid) : setgroups(1, &gid)) == -1 ||
        setresgid(gid, gid, gid) == -1 || setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) == -1) {
        snprintf(err, errlen, "user = %s: %s", g->user, strerror(errno));
        return -1;
    }
    lb_log(CONF_LOG_INFO, "privileges", "user=%s uid=%u gid=%u", pw->pw_name,
           (unsigned)pw->pw_uid, (unsigned)gid);
    return 0;
}

/* Runs with SIGTERM, SIGINT, SIGHUP and SIGUSR2 blocked (main blocked them); they
 * are unblocked, with old, once libevent's handlers for them are added. */
static int
lb_main_run(struct lb_daemon *d, const char *path, const sigset_t *old)
{
    struct event *sig_ev[4] = { NULL, NULL, NULL, NULL };
    const struct conf *c = d->gen->conf;
    uint64_t fd_limit = lb_net_raise_fd_limit();
    char err[256];
    size_t started = 0;
    bool signals_ok = true;
    int status = 1;
    /* The hand-over reaches the admin port, and the decisions the data
     * path and the tier's verdict, through these only. */
    const struct lb_handover_admin admin = { lb_admin_fd, lb_admin_unlisten };
    const struct lb_state_data data = { lb_main_drain_scan, lb_queue_kick, lb_tier_publish };

    d->limit.max = c->global.max_connections;
    d->started_at = lb_wall_now();
    /* libevent's default timer clock is CLOCK_MONOTONIC_COARSE, which
     * advances by kernel ticks and, on a tickless kernel whose CPUs were
     * idle, can lag more than one: shutdown_timeout = 1s was seen closing
     * connections after 994 ms. Main's loop is not busy, so its timers run
     * on the precise clock (a timerfd). */
    d->base = lb_base_new(EVENT_BASE_FLAG_PRECISE_TIMER);
    d->workers = calloc(d->nworkers, sizeof(*d->workers));
    d->ncpus = conf_cpu_count();
    if (d->base == NULL || d->workers == NULL) {
        lb_log(CONF_LOG_ERROR, "start_failed", "error=\"out of memory\"");
        goto out;
    }
    d->mailbox = lb_mailbox_new(d->base, sizeof(struct lb_main_msg), lb_main_on_msgs, d);
    if (d->mailbox == NULL || lb_reload_init(d) == -1 || lb_members_init(d) == -1 ||
        lb_state_init(d, &data) == -1 || lb_tier_init(d) == -1 ||
        lb_gen_decide_reserve(d, d->gen, NULL) == -1) {
        lb_log(CONF_LOG_ERROR, "start_failed", "error=\"out of memory\"");
        goto out;
    }
    lb_main_log_start(d, path, fd_limit);
    {
        size_t held;                    /* none: nothing to warm at start */

        if (d->takeover != NULL)
            lb_takeover_state(d, d->gen);   /* what the running one knows */
        else
            lb_state_load(d, d->gen);   /* what the last run knew */
        lb_members_weigh_gen(d, d->gen);    /* the API's weights 0 (lb -x) */
        lb_gen_decide(d, d->gen, NULL, false, &held);   /* every server's starting place */
    }
    for (size_t i = 0; i < d->nworkers; i++) {
        if (lb_worker_init(&d->workers[i], d, (unsigned)i, err, sizeof(err)) == -1) {
            lb_log(CONF_LOG_ERROR, "start_failed", "worker=%zu error=%s", i,
                   lb_log_quote((char[300]){ 0 }, 300, err));
            goto out;
        }
    }

    /* Health and admin start before the workers, which read d->hc. */
    if (lb_health_start(d, d->gen, err, sizeof(err)) == -1 ||
        lb_admin_start(d, err, sizeof(err)) == -1 ||
        lb_control_start(d, &admin, err, sizeof(err)) == -1 ||
        lb_main_drop_privileges(&d->gen->conf->global, err, sizeof(err)) == -1) {
        lb_log(CONF_LOG_ERROR, "start_failed", "error=%s",
               lb_log_quote((char[300]){ 0 }, 300, err));
        signals_ok = false;
    }
    for (; signals_ok && started < d->nworkers; started++) {
        if (lb_worker_start(&d->workers[started]) == -1)
            break;
    }

    sig_ev[0] = evsignal_new(d->base, SIGTERM, lb_main_on_stop_signal, d);
    sig_ev[1] = evsignal_new(d->base, SIGINT, lb_main_on_stop_signal, d);
    sig_ev[2] = evsignal_new(d->base, SIGHUP, lb_main_on_hup, d);
    sig_ev[3] = evsignal_new(d->base, SIGUSR2, lb_main_on_usr2, d);
    for (size_t i = 0; i < sizeof(sig_ev) / sizeof(sig_ev[0]); i++) {
        if (sig_ev[i] == NULL || evsignal_add(sig_ev[i], NULL) == -1)
            signals_ok = false;
    }
    pthread_sigmask(SIG_SETMASK, old, NULL);    /* a pending one runs now */
    if (signals_ok && started < d->nworkers) {
        lb_log(CONF_LOG_ERROR, "start_failed", "error=\"cannot start worker threads or signal handlers\"");
        signals_ok = false;
    }
    if (!signals_ok) {
        lb_workers_post(d, LB_WORKER_FORCE);
        for (size_t i = 0; i < started; i++)
            lb_worker_post(&d->workers[i], LB_WORKER_STOP, NULL);
    } else {
        lb_log(CONF_LOG_INFO, "ready", "workers=%zu", d->nworkers);
        if (d->takeover != NULL)
            lb_takeover_finish(d);      /* serving: the old process may go */
        else if (lb_net_notify("READY=1") == -1)
            lb_log(CONF_LOG_WARN, "notify_failed", "error=\"%s\"", strerror(errno));
        lb_members_sync(d, d->file_conf);   /* discovery's first rounds */
        status = 0;
    }

    if (started > 0)            /* ends when the last worker has exited */
        event_base_loop(d->base, EVLOOP_NO_EXIT_ON_EMPTY);

    lb_reload_stop(d);                  /* answered before the admin port ends */
    lb_admin_stop(d);
    lb_control_stop(d);
    lb_health_stop(d);
    for (size_t i = 0; i < started; i++)
        pthread_join(d->workers[i].thread, NULL);
    if (started > 0)
        lb_state_save(d);               /* for the next start */
    if (atomic_load(&d->forced_closes) > 0)
        lb_log(CONF_LOG_WARN, "shutdown_timeout", "closed=%llu",
               (unsigned long long)atomic_load(&d->forced_closes));
out:
    for (size_t i = 0; i < sizeof(sig_ev) / sizeof(sig_ev[0]); i++) {
        if (sig_ev[i] != NULL)
            event_free(sig_ev[i]);
    }
    if (d->workers != NULL) {
        for (size_t i = 0; i < d->nworkers; i++)
            lb_worker_fini(&d->workers[i]);
        free(d->workers);
    }
    lb_members_fini(d);
    lb_state_fini(d);
    lb_tier_fini(d);
    lb_reload_fini(d);
    lb_mailbox_free(d->mailbox, NULL, NULL);
    if (d->base != NULL)
        event_base_free(d->base);
    return status;
}

int
main(int argc, char **argv)
{
    struct lb_daemon d = { 0 };
    const char *path = NULL;
    bool test_only = false, is_takeover = false, is_reload = false;
    static const struct option longopts[] = {
        { "config", required_argument, NULL, 'c' }, { "test", no_argument, NULL, 't' },
        { "reload", no_argument, NULL, 'r' }, { "takeover", no_argument, NULL, 'x' },
        { "version", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct conf *conf = NULL;
    char *errors = NULL;
    char gen_err[300];
    sigset_t old;
    int opt, status;

    while ((opt = getopt_long(argc, argv, "c:rthvx", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': path = optarg; break;
        case 't': test_only = true; break;
        case 'r': is_reload = true; break;
        case 'x': is_takeover = true; break;
        case 'v': printf("lb %s\n", LB_VERSION); return 0;
        case 'h': lb_usage(stdout); return 0;
        default: lb_usage(stderr); return 2;
        }
    }
    if (path == NULL || optind != argc || test_only + is_takeover + is_reload > 1) {
        lb_usage(stderr);
        return 2;
    }
    if (conf_load(path, &conf, &errors) == -1) {
        fputs(errors != NULL ? errors : "out of memory while reporting config errors\n", stderr);
        free(errors);
        return 1;
    }
    if (test_only) {
        conf_free(conf);
        printf("configuration OK\n");
        return 0;
    }
    if (is_reload) {
        status = lb_admin_ask_reload(conf);
        conf_free(conf);
        return status;
    }
    if (is_takeover && conf->global.control_socket[0] == '\0') {
        fprintf(stderr, "%s: -x takes over through [global] control_socket, which is not set\n",
                path);
        conf_free(conf);
        return 1;
    }

    lb_log_set_level(conf->global.log_level);
    if (lb_log_set_target(conf->global.log_target, conf->global.syslog_socket, gen_err,
                          sizeof(gen_err)) == -1)
        lb_log(CONF_LOG_WARN, "syslog_unavailable", "error=%s detail=\"logging to stderr\"",
               lb_log_quote((char[600]){ 0 }, 600, gen_err));
    lb_log_route_libevent();
    signal(SIGPIPE, SIG_IGN);   /* a peer's reset must not kill the process */
    if (evthread_use_pthreads() == -1) {
        lb_log(CONF_LOG_ERROR, "start_failed", "error=\"evthread_use_pthreads failed\"");
        conf_free(conf);
        return 1;
    }
    /* No thread but main may take the process signals, and main only
     * through libevent's handlers: blocked from before the listeners are
     * bound until those handlers are added, so that a SIGTERM while lb
     * starts (clients may connect from the bind on) is a graceful stop,
     * not a kill. Threads inherit the mask. */
    lb_signals_block(&old);
    /* Listening sockets are bound here, before anything starts: a port in
     * use is reported like a config error and lb does not start. */
    d.nworkers = conf->global.workers;
    pthread_mutex_init(&d.state_lock, NULL);
    d.path = path;
    if (lb_reload_new(&d) == -1) {
        lb_log(CONF_LOG_ERROR, "start_failed", "error=\"out of memory\"");
        conf_free(conf);
        return 1;
    }
    {
        /* Named now: once a package replaced the file, /proc/self/exe
         * names the old one "(deleted)", and SIGUSR2 wants the new one. */
        ssize_t n = readlink("/proc/self/exe", d.exe, sizeof(d.exe) - 1);

        d.exe[n > 0 ? n : 0] = '\0';
    }
    /* The file's config stays as read: each generation is a copy of it
     * with the pools' members added (members.c); at start there are none. */
    if ((d.file_conf = conf_dup(conf)) == NULL) {
        lb_log(CONF_LOG_ERROR, "start_failed", "error=\"out of memory\"");
        lb_reload_free(&d);
        conf_free(conf);
        return 1;
    }
    /* lb -x: the running process's sockets, members and states, before
     * the first generation, which is built on them. */
    if (is_takeover &&
        ((d.takeover = lb_takeover_receive(conf->global.control_socket, d.nworkers, gen_err,
                                           sizeof(gen_err))) == NULL ||
         lb_takeover_members(&d, gen_err, sizeof(gen_err)) == -1 ||
         lb_members_apply(&d, conf, gen_err, sizeof(gen_err)) == -1)) {
        lb_log(CONF_LOG_ERROR, "takeover_failed", "error=%s",
               lb_log_quote((char[600]){ 0 }, 600, gen_err));
        lb_takeover_free(d.takeover);
        lb_members_fini(&d);
        lb_reload_free(&d);
        conf_free(conf);
        conf_free(d.file_conf);
        return 1;
    }
    {
        size_t nadopt;
        struct lb_listen *const *adopt = lb_takeover_listens(&d, &nadopt);

        d.gen = lb_gen_new(conf, NULL, adopt, nadopt, d.nworkers, &d.next_id, gen_err,
                           sizeof(gen_err));
    }
    if (d.gen == NULL) {
        lb_log(CONF_LOG_ERROR, "start_failed", "error=%s",
               lb_log_quote((char[600]){ 0 }, 600, gen_err));
        lb_takeover_free(d.takeover);
        lb_members_fini(&d);
        lb_reload_free(&d);
        conf_free(d.file_conf);
        return 1;
    }
    status = lb_main_run(&d, path, &old);
    lb_takeover_free(d.takeover);       /* a start that failed before "go" */
    lb_reload_free(&d);
    lb_gen_unref(d.gen);
    lb_log(CONF_LOG_INFO, "exit", "status=%d", status);
    libevent_global_shutdown();
    return status;
}
