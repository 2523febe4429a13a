/*
 * discover.c - a discovery as its caller sees it: the spec, the source that
 * runs it and that source's state. Every call goes through the source's
 * table (discover.h); nothing here knows what a source asks.
 */
#include <stdlib.h>
#include <string.h>

#include "discover.h"

/* Allocated by dsc_new, freed by dsc_free; the thread of its base. The
 * spec lives here so that the source's state may point into it. */
struct dsc {
    const struct dsc_source *source;
    struct dsc_spec spec;
    void *state;
};

struct dsc *
dsc_new(struct event_base *base, const struct dsc_spec *spec, dsc_result_pt fn, void *arg)
{
    struct dsc *d = calloc(1, sizeof(*d));

    if (d == NULL)
        return NULL;
    d->source = spec->source;
    d->spec = *spec;
    d->state = d->source->new(base, &d->spec, fn, arg);
    if (d->state == NULL) {
        free(d);
        return NULL;
    }
    return d;
}

int
dsc_start(struct dsc *d)
{
    return d->source->start(d->state);
}

void
dsc_free(struct dsc *d)
{
    if (d == NULL)
        return;
    d->source->free(d->state);
    free(d);
}

const struct dsc_spec *
dsc_spec_of(const struct dsc *d)
{
    return &d->spec;
}

void
dsc_info_of(const struct dsc *d, struct dsc_info *out)
{
    memset(out, 0, sizeof(*out));
    if (d->source->info != NULL)
        d->source->info(d->state, out);
}

bool
dsc_spec_equal(const struct dsc_spec *a, const struct dsc_spec *b)
{
    return a->source == b->source && a->source->spec_equal(a, b);
}
