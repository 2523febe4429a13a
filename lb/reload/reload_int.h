/*
 * reload_int.h - the state of reload/ (reload.c, members.c, checks.c), for
 * its own files only: other parts go through reload.h.
 */
#ifndef LB_RELOAD_INT_H
#define LB_RELOAD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reload.h"

struct event;
struct lb_reload_run;

/* Who owns it: main allocates it (lb_reload_new) before anything else is
 * built, as a hand-over brings members first, and frees it at exit. Main
 * writes it; fig, members and nmembers under state_lock. */
struct lb_reload {
    struct lb_reload_figures fig;       /* counters, error and retired */
    struct event *retired_ev;           /* frees retired gens once unused */
    struct event *hup_ev;               /* SIGHUP, coalesced */
    struct event *warm_ev;              /* a reload's warm-up bound */
    struct event *settle_ev;            /* a reload waits for its file */
    struct lb_reload_run *reload_run;   /* the reload waiting for workers */
    bool is_reload_again;               /* asked while one was running */
    bool is_reload_again_file;          /* ... and one of them reads the file */
    const char *reload_again_trigger;

    /* the members of pools not in the file (members.c) */
    struct lb_members **members;        /* under state_lock */
    size_t nmembers;
    struct event *members_ev;           /* a set changed: a members reload */
    struct event *sweep_ev;             /* deletes silent ephemeral servers */

    /* requests waiting for the next reload to start (lb_reload_request) */
    struct lb_reload_waiters {
        struct lb_reload_waiter {
            lb_reload_done_pt done;
            void *arg;
        } *list;
        size_t n, cap;
    } asked_file, asked_members;
};

/* A reload that warms new servers before the switch: ends the warm-up when
 * none is pending any more (is_bound: at its time bound, whatever they
 * are; checks.c calls it as verdicts come). Main thread. */
void lb_reload_warm_check(struct lb_daemon *d, bool is_bound);

#endif /* LB_RELOAD_INT_H */
