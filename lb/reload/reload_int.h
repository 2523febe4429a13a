/*
 * reload_int.h - the state of reload/ (reload.c, members.c, checks.c), for
 * its own files only: other parts go through reload.h.
 */
#ifndef LB_RELOAD_INT_H
#define LB_RELOAD_INT_H

#include <pthread.h>
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

    /* the admin thread's requests, answered by main */
    pthread_mutex_t reload_lock;        /* guards the fields below */
    pthread_cond_t reload_cond;
    uint64_t reload_asked, reload_done; /* tickets of POST /reload */
    int reload_status;                  /* of the reload that ended last */
    char reload_message[1024];
    uint64_t members_asked, members_done;   /* tickets of the admin API's
                                               members changes */
    int members_status;
    char members_message[1024];
};

/* A reload that warms new servers before the switch: ends the warm-up when
 * none is pending any more (is_bound: at its time bound, whatever they
 * are; checks.c calls it as verdicts come). Main thread. */
void lb_reload_warm_check(struct lb_daemon *d, bool is_bound);

#endif /* LB_RELOAD_INT_H */
