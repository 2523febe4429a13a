/*
 * handover.h - an upgrade without a dropped connection (lb -x, SIGUSR2):
 * the running process hands its listening sockets, server states and
 * members to a new one over the control socket. Main thread.
 */
#ifndef LB_HANDOVER_H
#define LB_HANDOVER_H

#include <stddef.h>

struct conf_addr;
struct lb_daemon;
struct lb_gen;
struct lb_listen;

/* ----------------------------------------------------------- takeover.c */

/* What a hand-over (lb -x) brought: the running process's sockets, its
 * servers' states and its pools' members. */
struct lb_takeover;

/* The new process: connects to the control socket at path and takes the
 * running process's answer (its listen sets adopted for nworkers). NULL
 * with err set: nothing was taken, the running process serves on. */
struct lb_takeover *lb_takeover_receive(const char *path, size_t nworkers, char *err,
                                        size_t errlen);
void lb_takeover_free(struct lb_takeover *t);
/* d->takeover's members into d, before the first generation is built. */
int lb_takeover_members(struct lb_daemon *d, char *err, size_t errlen);
/* Its listen sets, for lb_gen_new (none without a hand-over). */
struct lb_listen *const *lb_takeover_listens(const struct lb_daemon *d, size_t *n);
/* Its servers' states into g, before the first decision. */
void lb_takeover_state(struct lb_daemon *d, struct lb_gen *g);
/* Its admin socket when it is bound to addr (taken: -1 the next time). */
int lb_takeover_admin_fd(struct lb_daemon *d, const struct conf_addr *addr);
/* Once serving: tells the old process to stop accepting and drain, waits
 * for its word and frees d->takeover. */
void lb_takeover_finish(struct lb_daemon *d);

/* ------------------------------------------------------------ control.c */

/* SIGUSR2: starts the binary this process was started from, as it is on
 * disk now (an upgraded package's), with -c CONFIG -x: it takes over. */
void lb_takeover_spawn(struct lb_daemon *d);

/* The admin port, as a hand-over sees it: main passes admin.c's calls
 * (lb_admin_fd, lb_admin_unlisten), so that this part, which the admin
 * port calls, never calls it back by name. fd: its listening socket, or
 * -1; unlisten: stop accepting on it, a new process has it now. */
typedef int (*lb_handover_admin_fd_pt)(struct lb_daemon *d);
typedef void (*lb_handover_admin_unlisten_pt)(struct lb_daemon *d);
struct lb_handover_admin {
    lb_handover_admin_fd_pt fd;
    lb_handover_admin_unlisten_pt unlisten;
};

/* The control socket ([global] control_socket), on main's loop: the
 * socket of a hand-over or a fresh one; admin is copied. -1 with err set
 * (another lb answers at the path). Stop unlinks it unless it was handed
 * over. */
int lb_control_start(struct lb_daemon *d, const struct lb_handover_admin *admin, char *err,
                     size_t errlen);
void lb_control_stop(struct lb_daemon *d);

#endif /* LB_HANDOVER_H */
