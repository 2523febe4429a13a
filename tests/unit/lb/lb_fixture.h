/*
 * lb_fixture.h - a daemon around a generation built from config text, as
 * main builds it at start (lb_gen_new, lb_gen_decide), without workers,
 * health threads or the admin port: what the unit tests of tests/unit/lb/
 * run lb/state, lb/data's queue and lb/admin's documents on.
 *
 * A frontend needs a listening socket and the config a real port, so the
 * fixture makes one itself: a socket bound to 127.0.0.1:0, whose port "@"
 * stands for in the config text, handed to lb_gen_new as adopt[] (what a
 * hand-over brings). Nothing binds a fixed port, and no other process can
 * take the port between a probe and lb's bind.
 */
#ifndef LB_FIXTURE_H
#define LB_FIXTURE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon.h"
#include "reload.h"
#include "state.h"

struct fx {
    struct lb_daemon d;
    struct lb_listen *listen;           /* the frontend's socket, adopted */
    int scans;                          /* lb_state_data.scan calls */
};

static struct fx *fx_current;           /* for fx_scan */

static inline void
fx_scan(struct lb_daemon *d)
{
    (void)d;
    if (fx_current != NULL)
        fx_current->scans++;
}

static inline void
fx_kick(struct lb_queue *q)
{
    (void)q;                            /* the queue tests kick themselves */
}

static inline void
fx_die(const char *what, const char *why)
{
    fprintf(stderr, "fixture: %s: %s\n", what, why);
    exit(2);
}

/* A listening socket on 127.0.0.1, port chosen by the kernel. */
static inline int
fx_listen_any(unsigned *port)
{
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 || listen(fd, 8) != 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &len) != 0)
        fx_die("listen on 127.0.0.1:0", "failed");
    *port = ntohs(sin.sin_port);
    return fd;
}

/* text with each '@' replaced by port. */
static inline char *
fx_text(const char *text, unsigned port)
{
    size_t n = strlen(text) * 2 + 64;
    char *out = malloc(n), *o = out;

    if (out == NULL)
        fx_die("config", "out of memory");
    for (const char *s = text; *s != '\0'; s++) {
        if (*s == '@')
            o += sprintf(o, "%u", port);
        else
            *o++ = *s;
    }
    *o = '\0';
    return out;
}

static inline struct conf *
fx_conf(const char *text)
{
    struct conf *c = NULL;
    char *errors = NULL;

    if (conf_load_text("test.ini", text, strlen(text), &c, &errors) != 0)
        fx_die("config", errors != NULL ? errors : "?");
    return c;
}

/* A generation of text (its '@' is the fixture's port) replacing old. */
static inline struct lb_gen *
fx_gen(struct fx *f, const char *text, const struct lb_gen *old)
{
    char err[512];
    char *t = fx_text(text, (unsigned)ntohs(((const struct sockaddr_in *)(const void *)
                                                 &f->listen->addr.ss)->sin_port));
    struct lb_gen *g = lb_gen_new(fx_conf(t), old, &f->listen, 1, 1, &f->d.next_id, err,
                                  sizeof(err));

    free(t);
    if (g == NULL)
        fx_die("lb_gen_new", err);
    lb_members_weigh_gen(&f->d, g);     /* as main and a reload do */
    return g;
}

/* The daemon at start, up to the first decision: a generation of text,
 * state/ and reload/ as main makes them (what lb_state_load and
 * lb_state_apply run before). Log lines below warn are not written. */
static inline void
fx_build(struct fx *f, const char *text)
{
    const struct lb_state_data data = { .scan = fx_scan, .kick = fx_kick };   /* no /ready to publish */
    unsigned port;
    int fd;
    char err[256];

    memset(f, 0, sizeof(*f));
    fx_current = f;
    lb_log_set_level(CONF_LOG_WARN);
    pthread_mutex_init(&f->d.state_lock, NULL);
    f->d.base = event_base_new();
    fd = fx_listen_any(&port);
    f->listen = lb_listen_adopt(&fd, 1, 1, err, sizeof(err));
    if (f->d.base == NULL || f->listen == NULL || lb_reload_new(&f->d) == -1 ||
        lb_state_init(&f->d, &data) == -1)
        fx_die("daemon", f->listen == NULL ? err : "out of memory");
    f->d.gen = fx_gen(f, text, NULL);
    f->d.limit.max = f->d.gen->conf->global.max_connections;
    f->d.started_at = lb_wall_now();
    if (lb_gen_decide_reserve(&f->d, f->d.gen, NULL) == -1)
        fx_die("lb_gen_decide_reserve", "out of memory");
}

/* The first decision: every server's starting place (check = none: in
 * rotation; a check: starting, which counts as up). */
static inline void
fx_decide(struct fx *f)
{
    size_t held;

    pthread_mutex_lock(&f->d.state_lock);
    lb_gen_decide(&f->d, f->d.gen, NULL, false, &held);
    pthread_mutex_unlock(&f->d.state_lock);
}

static inline void
fx_start(struct fx *f, const char *text)
{
    fx_build(f, text);
    fx_decide(f);
}

static inline void
fx_stop(struct fx *f)
{
    lb_reload_fini(&f->d);
    lb_reload_free(&f->d);
    lb_state_fini(&f->d);
    lb_gen_unref(f->d.gen);
    lb_listen_unref(f->listen);
    event_base_free(f->d.base);
    pthread_mutex_destroy(&f->d.state_lock);
    fx_current = NULL;
}

/* Server `name` of pool `pool` of the daemon's generation; exits when the
 * config has none (a broken test, not a failed check). */
static inline struct lb_server *
fx_server(struct fx *f, const char *pool, const char *name)
{
    struct lb_server *s = lb_gen_find_server(f->d.gen, pool, name);

    if (s == NULL)
        fx_die(pool, name);
    return s;
}

/* A probe's verdict on srv, as the health module posts it to main. */
static inline void
fx_probe(struct fx *f, struct lb_server *srv, bool passed, const char *detail)
{
    static uint64_t seq;
    struct hc_result r = { .id = srv->b->id, .seq = ++seq, .passed = passed,
                           .duration_ms = 2.0, .lag_ms = 1.0,
                           .started_mono_ms = lb_mono_ms(), .started_at = lb_wall_now() };

    snprintf(r.detail, sizeof(r.detail), "%s", detail);
    pthread_mutex_lock(&f->d.state_lock);
    lb_server_apply_check(&f->d, srv, &r);
    pthread_mutex_unlock(&f->d.state_lock);
}

#endif /* LB_FIXTURE_H */
