/* SPDX-License-Identifier: Apache-2.0 */
/*
 * [mgmt] metrics_listen: Prometheus scrapes GET /metrics over HTTP on a loopback address
 * (mgmt/mgmt_http.c), served by the main lcore between its ticks; never a hot lcore, never
 * a blocking call. The text is the same as `omsctl metrics` (app_metrics_write).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "app_views.h"
#include "mgmt/mgmt.h"

static struct mgmt_http *http;
static const struct app *http_app;

static int
body(void *ctx, struct mgmt_out *o)
{
	(void)ctx;
	return app_metrics_write(app_views_main_ctx(), http_app, o);
}

int
app_http_open(const struct app *app)
{
	const struct app_config *cfg = &app->cfg;
	if (cfg->metrics_port == 0)
		return 0;
	http_app = app;
	int rc = mgmt_http_open(&http, cfg->metrics_ip_be, cfg->metrics_port, body, NULL);
	if (rc < 0)
		return rc;
	APP_LOG(INFO, "metrics on http://%s/metrics", cfg->metrics_listen);
	return 0;
}

void
app_http_poll(void)
{
	if (http == NULL)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	mgmt_http_poll(http, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

void
app_http_close(void)
{
	mgmt_http_close(http);
	http = NULL;
}

/* The listener's own counters, as stats lines (metrics: omsd_http_*). */
void
app_http_stats_write(FILE *out)
{
	if (http == NULL)
		return;
	struct mgmt_http_stats st;
	mgmt_http_stats_get(http, &st);
	fprintf(out, "http_accepted %" PRIu64 "\n", st.accepted);
	fprintf(out, "http_requests %" PRIu64 "\n", st.requests);
	fprintf(out, "http.200.answers %" PRIu64 "\n", st.ok);
	fprintf(out, "http.404.answers %" PRIu64 "\n", st.not_found);
	fprintf(out, "http.405.answers %" PRIu64 "\n", st.bad_method);
	fprintf(out, "http.400.answers %" PRIu64 "\n", st.bad_request);
	fprintf(out, "http.431.answers %" PRIu64 "\n", st.too_large);
	fprintf(out, "http.503.answers %" PRIu64 "\n", st.busy);
	fprintf(out, "http.500.answers %" PRIu64 "\n", st.errors);
	fprintf(out, "http_timeouts %" PRIu64 "\n", st.timeouts);
}
