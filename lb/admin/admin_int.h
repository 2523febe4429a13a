/*
 * admin_int.h - between the admin thread (admin.c) and main, which carries
 * out the admin port's orders (admin_order.c), for lb/admin's own files.
 *
 * An order (an operator's action, a weight, an add, a delete, a heartbeat,
 * a reload) is never decided on the admin thread: it posts a struct
 * lb_admin_order to main's orders mailbox and goes back to its loop; main
 * decides and applies under state_lock and posts a struct lb_admin_answer
 * (status and body) to the admin thread's answers mailbox, at once or when
 * the reload the order needs ends; the admin thread sends it.
 */
#ifndef LB_ADMIN_INT_H
#define LB_ADMIN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "admin_request.h"
#include "bal.h"
#include "conf.h"

struct evbuffer;
struct lb_daemon;
struct lb_server;

enum lb_admin_order_kind {
    LB_ADMIN_ORDER_ACTION = 0,          /* enable, drain, disable */
    LB_ADMIN_ORDER_WEIGHT,
    LB_ADMIN_ORDER_ADD,
    LB_ADMIN_ORDER_DELETE,
    LB_ADMIN_ORDER_HEARTBEAT,
    LB_ADMIN_ORDER_RELOAD,
};

/* A request waiting for main's answer: the admin thread's, which main only
 * hands back (admin.c). */
struct lb_admin_wait;

/* Admin thread -> main: one request's order, with what it needs. */
struct lb_admin_order {
    enum lb_admin_order_kind kind;
    struct lb_admin_wait *wait;         /* handed back in the answer */
    char pool[CONF_NAME_MAX + 1];
    char server[CONF_NAME_MAX + 1];
    enum bal_admin admin;               /* ACTION */
    uint32_t weight;                    /* WEIGHT */
    enum bal_beat beat;                 /* HEARTBEAT */
    char note[LB_ADMIN_NOTE_MAX];
    char server_line[sizeof(((struct lb_admin_verdict *)0)->server_line)];  /* ADD,
                                           HEARTBEAT: "" or its address */
    bool is_ephemeral;                  /* ADD, HEARTBEAT */
};

/* Main -> admin thread: the answer to send for one order. */
struct lb_admin_answer {
    struct lb_admin_wait *wait;
    int status;
    const char *reason;                 /* literals */
    const char *type;
    struct evbuffer *body;              /* the admin thread's from now on;
                                           NULL: out of memory (500) */
};

/* Main's handler of the orders mailbox (lb_mailbox_pt). */
void lb_admin_on_orders(void *msgs, size_t n, void *arg);
/* Main: hands an answer to the admin thread (admin.c). After the admin
 * port stopped it only frees the body. */
void lb_admin_answer_post(struct lb_daemon *d, const struct lb_admin_answer *a);

/* Server `server` of pool `pool` in the current generation, or NULL with
 * *pool_found telling which is missing. Caller holds state_lock. */
struct lb_server *lb_admin_find_server(struct lb_daemon *d, const char *pool,
                                       const char *server, bool *pool_found);
/* {"error":"message"}\n, escaped. */
void lb_admin_error_body(struct evbuffer *b, const char *message);

#endif /* LB_ADMIN_INT_H */
