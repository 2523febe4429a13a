/*
 * admin.h - the admin port: stats, metrics, the dashboard and operator
 * actions, served from a thread of its own.
 */
#ifndef LB_ADMIN_H
#define LB_ADMIN_H

#include <stddef.h>

/* Connections the admin port holds at most, and so the descriptors it may
 * take (main.c keeps them out of the data path's budget): enough for a few
 * dashboards (one kept-alive connection each), a Prometheus scraper and
 * scripts; the 65th connection closes the one that has waited longest for
 * its request. */
#define LB_ADMIN_MAX_CONNS 64

struct evbuffer;
struct lb_daemon;
struct lb_server;
struct lb_server_view;

/* lb -r: asks the lb running with config c to reload (POST /reload on
 * its admin port) and prints the answer: 0 when it reloaded, else 1. */
struct conf;
int lb_admin_ask_reload(const struct conf *c);

/* Binds the admin port and starts its thread. Main thread. -1 with err. */
int lb_admin_start(struct lb_daemon *d, char *err, size_t errlen);
void lb_admin_stop(struct lb_daemon *d);
/* Stops accepting on the admin port, whose socket a new process took over
 * (lb -x); answers in progress finish. Any thread. */
void lb_admin_unlisten(struct lb_daemon *d);
/* The admin port's listening socket (for a hand-over), or -1. Main. */
int lb_admin_fd(struct lb_daemon *d);

/* ---------------------------------------- admin_stats.c, for admin.c
 * The documents, built from a copy taken under state_lock (the lock is not
 * held while they are written). -1 when out of memory. Admin thread. */
int lb_admin_stats_json(struct lb_daemon *d, struct evbuffer *out);
int lb_admin_metrics(struct lb_daemon *d, struct evbuffer *out);
/* GET /pools/P: the pool as /stats shows it; 1 when there is no such pool. */
int lb_admin_pool_json(struct lb_daemon *d, const char *pool, struct evbuffer *out);

/* One server: its view is taken under state_lock (lb_admin_view_take),
 * written out without it. The view's storage is the caller's. */
struct lb_server_view *lb_admin_view_new(void);
void lb_admin_view_take(const struct lb_server *srv, struct lb_server_view *v);
void lb_admin_server_json(struct lb_daemon *d, const struct lb_server_view *v,
                          struct evbuffer *out);

/* A JSON string, escaped whatever it holds. */
void lb_json_str(struct evbuffer *out, const char *s);
/* Appends a string literal. */
#define LB_ADD_LIT(out, lit) evbuffer_add((out), (lit), sizeof(lit) - 1)

#endif /* LB_ADMIN_H */
