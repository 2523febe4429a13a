/*
 * discover.h - a pool's servers from a source outside the file (dsc:
 * discovery), behind one interface that each source implements.
 *
 * A struct dsc is one discovery: a spec (what to ask, whom, how often) and
 * the source that runs it, on the event base it is given (main's: never a
 * thread that relays or probes). The caller makes it with dsc_new, starts
 * it with dsc_start, and keeps it across a reload while dsc_spec_equal
 * says its spec did not change. Each round of asking ends in one call of
 * the callback: the whole set of servers, or an error. An empty answer is
 * an error too: the caller keeps its last set, so neither a failed nor an
 * empty answer ever empties a pool.
 *
 * A source is a table of four calls (struct dsc_source), defined in a
 * file of its own, dsc_SOURCE.c, and declared with what the caller needs
 * to fill a spec for it in dsc_SOURCE.h. This file names no source: adding
 * one adds two files and the caller's choice of it.
 */
#ifndef DISCOVER_H
#define DISCOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "conf.h"                       /* struct conf_endpoint */

struct event_base;
struct dsc;
struct dsc_source;

#define DSC_NAME_MAX 255                /* text form, with room for the NUL */
#define DSC_SERVER_NAME_MAX 63          /* as a config server name */

/* What a discovery asks; each source says how it reads each field. */
struct dsc_spec {
    const struct dsc_source *source;    /* which source runs it */
    char name[DSC_NAME_MAX + 1];        /* what is asked for */
    uint16_t port;                      /* the servers' port when the answer
                                           gives none */
    struct sockaddr_storage endpoint;   /* whom it asks */
    socklen_t endpoint_len;
    uint64_t interval_ms;               /* from one round to the next */
    /* a registry (etcd): its gateway's URLs, tried in turn, and how to log
       in; "" when unused */
    struct conf_endpoint endpoints[CONF_ENDPOINTS_MAX];
    size_t nendpoints;
    char user[128], password[128];
    char tls_ca[1024];                  /* CA file for https ("": the system's) */
    char label[DSC_SERVER_NAME_MAX + 1]; /* whose discovery (the pool), for log
                                           lines only: not compared */
};

/* Where a discovery stands, for /stats: what a source that keeps a session
 * (etcd) talks to and how far it has read; zeros for the others. */
struct dsc_info {
    char endpoint[300];                 /* "http://10.0.0.2:2379" */
    int64_t revision;                   /* the last one its set reflects */
};

/* One discovered server. name: unique in the set, as a config server name
 * (at most DSC_SERVER_NAME_MAX); the source says how it is made. */
struct dsc_server {
    char name[DSC_SERVER_NAME_MAX + 1];
    char address[64];                   /* "10.0.0.9:8080", "[::1]:8080" */
    uint32_t weight;                    /* >= 1 (the caller clamps it to its
                                           range) */
};

/* A round's end: n servers (n >= 1, sorted by name) and error NULL, or
 * n == 0 and error saying why, naming what was asked where it can ("...:
 * no answer within 5000 ms", "empty answer", ...). Called
 * on the dsc's base, never inside dsc_new or dsc_start; it must not
 * dsc_free the dsc (defer that). */
typedef void (*dsc_result_pt)(void *arg, const struct dsc_server *servers, size_t n,
                              const char *error);

/* The interface of a source. state is what its new returned, passed back
 * to its start and free.
 *   new: the state of one discovery, or NULL (out of memory, no socket).
 *        spec is the dsc's own copy, valid until free: the source may keep
 *        a pointer to it and write it to its canonical form (what
 *        dsc_spec_of then shows). Nothing runs and fn is not called yet.
 *   start: begins the rounds (the first at once, from the loop); 0 or -1.
 *   free: stops and frees the state; pending rounds end without a call.
 *   spec_equal: whether two specs of this source ask the same thing.
 *   info: where it stands (NULL: a source with nothing to tell). */
struct dsc_source {
    const char *name;                   /* its value of the pool's discover key */
    void *(*new)(struct event_base *base, struct dsc_spec *spec, dsc_result_pt fn, void *arg);
    int (*start)(void *state);
    void (*free)(void *state);
    bool (*spec_equal)(const struct dsc_spec *a, const struct dsc_spec *b);
    void (*info)(void *state, struct dsc_info *out);
};

/* One discovery of spec by spec->source, not running yet. NULL when out of
 * memory or the source cannot make one. The caller owns it (dsc_free). */
struct dsc *dsc_new(struct event_base *base, const struct dsc_spec *spec, dsc_result_pt fn,
                    void *arg);
/* Begins its rounds. 0, or -1 (the caller frees it). */
int dsc_start(struct dsc *d);
void dsc_free(struct dsc *d);
/* The spec d runs, in its source's canonical form. */
const struct dsc_spec *dsc_spec_of(const struct dsc *d);
/* Where d stands (zeros when its source tells nothing). Its base's
 * thread. */
void dsc_info_of(const struct dsc *d, struct dsc_info *out);
/* Same source and, by that source's rule, the same question: a reload
 * keeps a dsc whose spec is equal to the new one. */
bool dsc_spec_equal(const struct dsc_spec *a, const struct dsc_spec *b);

#endif /* DISCOVER_H */
