// SPDX-License-Identifier: MIT
//
// server.cc - the kubelet's device plugin API (api.proto, v1beta1) over
// the plugin's C logic (dp.h): every call is translated to and from one
// C function, under one lock, so that what the plugin decides is the same
// code that tests/k8s/xdm_k8s_allocate runs without gRPC.
#include "config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "api.grpc.pb.h"
#include "tools/device-plugin/server.h"

namespace {

namespace api = v1beta1;

// What the kubelet's calls and the health probe share.  gen counts the
// device list's changes; each ListAndWatch stream sends when it differs
// from what it sent last.
struct Hub {
	std::mutex mu;
	std::condition_variable cv;
	struct xdm_dp_state *state = nullptr;
	unsigned long gen = 0;
	bool stopping = false;
};

Hub hub;

class Plugin final : public api::DevicePlugin::Service {
	grpc::Status GetDevicePluginOptions(grpc::ServerContext *, const api::Empty *,
					    api::DevicePluginOptions *out) override
	{
		out->set_pre_start_required(false);
		out->set_get_preferred_allocation_available(true);
		return grpc::Status::OK;
	}

	static void list(api::ListAndWatchResponse *out)
	{
		const struct xdm_dp_state *s = hub.state;

		for (int g = 0; g < s->ngpus; g++)
			for (unsigned int u = 0; u < s->gpus[g].units; u++) {
				char id[XDM_DP_ID_MAX + 1];
				api::Device *d = out->add_devices();

				xdm_dp_device_id(&s->gpus[g], u, id);
				d->set_id(id);
				d->set_health(s->gpus[g].healthy ? "Healthy" : "Unhealthy");
			}
	}

	grpc::Status ListAndWatch(grpc::ServerContext *ctx, const api::Empty *,
				  grpc::ServerWriter<api::ListAndWatchResponse> *w) override
	{
		std::unique_lock<std::mutex> l(hub.mu);
		unsigned long sent = hub.gen - 1;

		while (!hub.stopping && !ctx->IsCancelled()) {
			if (sent != hub.gen) {
				api::ListAndWatchResponse r;

				list(&r);
				sent = hub.gen;
				l.unlock();
				bool ok = w->Write(r);
				l.lock();
				if (!ok)
					break;
				continue;
			}
			// Woken by a change or a stop; the bound only notices a
			// kubelet that went away without a word.
			hub.cv.wait_for(l, std::chrono::seconds(1));
		}
		return grpc::Status::OK;
	}

	grpc::Status GetPreferredAllocation(grpc::ServerContext *,
					    const api::PreferredAllocationRequest *in,
					    api::PreferredAllocationResponse *out) override
	{
		std::lock_guard<std::mutex> l(hub.mu);

		for (const auto &req : in->container_requests()) {
			std::vector<const char *> avail, must;
			size_t size = req.allocation_size() > 0 ? (size_t)req.allocation_size() : 0;
			std::vector<const char *> picked(size);
			char err[XDM_DP_ERR_MAX];
			auto *resp = out->add_container_responses();

			for (const auto &id : req.available_deviceids())
				avail.push_back(id.c_str());
			for (const auto &id : req.must_include_deviceids())
				must.push_back(id.c_str());
			if (xdm_dp_prefer(hub.state, avail.data(), avail.size(), must.data(),
					  must.size(), size, picked.data(), err, sizeof(err))) {
				// The kubelet chooses by itself then; Allocate says
				// why if its choice spans GPUs.
				xdm_dp_log("GetPreferredAllocation of %zu units: %s", size, err);
				continue;
			}
			for (const char *id : picked)
				resp->add_deviceids(id);
		}
		return grpc::Status::OK;
	}

	grpc::Status Allocate(grpc::ServerContext *, const api::AllocateRequest *in,
			      api::AllocateResponse *out) override
	{
		std::lock_guard<std::mutex> l(hub.mu);

		for (const auto &req : in->container_requests()) {
			std::vector<const char *> ids;
			struct xdm_dp_answer a;
			char err[XDM_DP_ERR_MAX];

			for (const auto &id : req.devices_ids())
				ids.push_back(id.c_str());
			if (xdm_dp_allocate(hub.state, ids.data(), ids.size(), &a, err,
					    sizeof(err))) {
				xdm_dp_log("Allocate refused: %s", err);
				return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
						    std::string("xdm-device-plugin: ") + err);
			}
			auto *resp = out->add_container_responses();
			for (const auto &e : a.env)
				(*resp->mutable_envs())[e.key] = e.value;
			for (int i = 0; i < a.nmounts; i++) {
				api::Mount *mount = resp->add_mounts();

				mount->set_host_path(a.mounts[i].host);
				mount->set_container_path(a.mounts[i].container);
				mount->set_read_only(a.mounts[i].read_only);
			}
			xdm_dp_log("Allocate: %u units of GPU %s as group %s (%s bytes)", a.units,
				   hub.state->gpus[a.gpu].uuid, a.env[4].value, a.env[5].value);
		}
		return grpc::Status::OK;
	}

	grpc::Status PreStartContainer(grpc::ServerContext *, const api::PreStartContainerRequest *,
				       api::PreStartContainerResponse *) override
	{
		return grpc::Status::OK;
	}
};

// A service of its own for each server: a service serves one server.
std::unique_ptr<Plugin> plugin;
std::unique_ptr<grpc::Server> server;

} // namespace

extern "C" int xdm_dp_serve_start(struct xdm_dp_state *s, const char *path, char *err,
				  size_t errlen)
{
	grpc::ServerBuilder b;
	mode_t old;

	{
		std::lock_guard<std::mutex> l(hub.mu);
		hub.state = s;
		hub.stopping = false;
		hub.gen++;
	}
	// A socket left by a plugin that died would refuse the bind.
	unlink(path);
	b.AddListeningPort(std::string("unix://") + path, grpc::InsecureServerCredentials());
	plugin.reset(new Plugin());
	b.RegisterService(plugin.get());
	// The socket is made 0600 from the start: only root (the kubelet) may
	// talk to the plugin, never anyone for a moment.
	old = umask(0077);
	server = b.BuildAndStart();
	umask(old);
	if (!server) {
		plugin.reset();
		snprintf(err, errlen, "cannot serve on %s (gRPC could not bind it)", path);
		return -1;
	}
	chmod(path, 0600);
	return 0;
}

extern "C" void xdm_dp_serve_stop(void)
{
	if (!server)
		return;
	{
		std::lock_guard<std::mutex> l(hub.mu);
		hub.stopping = true;
	}
	hub.cv.notify_all();
	server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
	server->Wait();
	server.reset();
	plugin.reset();
}

extern "C" bool xdm_dp_serve_refresh(void)
{
	bool changed;

	{
		std::lock_guard<std::mutex> l(hub.mu);
		if (!hub.state)
			return false;
		changed = xdm_dp_refresh_health(hub.state);
		if (changed)
			hub.gen++;
	}
	if (changed)
		hub.cv.notify_all();
	return changed;
}

extern "C" int xdm_dp_register(const char *kubelet_socket, const char *endpoint,
			       const char *resource, char *err, size_t errlen)
{
	auto channel = grpc::CreateChannel(std::string("unix://") + kubelet_socket,
					   grpc::InsecureChannelCredentials());
	auto stub = api::Registration::NewStub(channel);
	grpc::ClientContext ctx;
	api::RegisterRequest req;
	api::Empty resp;

	req.set_version("v1beta1");
	req.set_endpoint(endpoint);
	req.set_resource_name(resource);
	req.mutable_options()->set_pre_start_required(false);
	req.mutable_options()->set_get_preferred_allocation_available(true);
	// A kubelet that accepts and never answers must not hold the plugin.
	ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
	grpc::Status st = stub->Register(&ctx, req, &resp);
	if (!st.ok()) {
		snprintf(err, errlen, "Register on %s failed: %s", kubelet_socket,
			 st.error_message().c_str());
		return -1;
	}
	return 0;
}
