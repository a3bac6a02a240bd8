// SPDX-License-Identifier: MIT
//
// fake_kubelet - a kubelet, as far as a device plugin can tell, built from
// the plugin's own api.proto: the Registration service on kubelet.sock in
// a directory, and a client of the plugin's socket there.  It drives
// xdm-device-plugin through what the real kubelet does and checks every
// answer; each step prints "ok: ..." and the first wrong answer "FAIL: ..."
// (exit 1).  Every wait is for an event (a Register call, a stream
// message) with a deadline far past it, which only a hung plugin meets.
//
//   fake_kubelet scenario DIR LOSTFILE UNITS
//       two GPUs of UNITS units each: registration, options, ListAndWatch,
//       GetPreferredAllocation packing, Allocate (and its refusals), a
//       kubelet restart (the plugin registers again on a new socket), GPU
//       1 lost (written to LOSTFILE: its units go Unhealthy in the stream)
//   fake_kubelet pods DIR N1 OUT1 N2 OUT2
//       as the kubelet admits two pods: for each, GetPreferredAllocation
//       of N units over what is left, then Allocate of that; the answer
//       is written to OUT as KEY=VALUE lines and "mount HOST CTR ro|rw"
#include "config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "api.grpc.pb.h"

namespace {

namespace api = v1beta1;

const char *const kResource = "xdm.io/gpu-memory";
const char *const kEndpoint = "xdm.io-gpu-memory.sock";
const auto kPatience = std::chrono::seconds(120);

[[noreturn]] void fail(const std::string &what)
{
	std::fprintf(stderr, "FAIL: %s\n", what.c_str());
	std::fflush(stdout);
	std::exit(1);
}

void ok(const std::string &what)
{
	std::printf("ok: %s\n", what.c_str());
	std::fflush(stdout);
}

class Registration final : public api::Registration::Service {
public:
	grpc::Status Register(grpc::ServerContext *, const api::RegisterRequest *req,
			      api::Empty *) override
	{
		std::lock_guard<std::mutex> l(mu_);
		requests_.push_back(*req);
		cv_.notify_all();
		return grpc::Status::OK;
	}

	// The n-th Register call (from 1), once it has come.
	api::RegisterRequest wait(size_t n)
	{
		std::unique_lock<std::mutex> l(mu_);
		if (!cv_.wait_for(l, kPatience, [&] { return requests_.size() >= n; }))
			fail("the plugin did not register (call " + std::to_string(n) + ")");
		return requests_[n - 1];
	}

private:
	std::mutex mu_;
	std::condition_variable cv_;
	std::vector<api::RegisterRequest> requests_;
};

struct Kubelet {
	std::string dir;
	// A service of its own for each start: a service serves one server.
	std::unique_ptr<Registration> reg;
	std::unique_ptr<grpc::Server> server;

	void start()
	{
		grpc::ServerBuilder b;

		reg.reset(new Registration());

		b.AddListeningPort("unix://" + dir + "/kubelet.sock",
				   grpc::InsecureServerCredentials());
		b.RegisterService(reg.get());
		server = b.BuildAndStart();
		if (!server)
			fail("cannot serve on " + dir + "/kubelet.sock");
	}

	void stop()
	{
		server->Shutdown(std::chrono::system_clock::now());
		server.reset();
		reg.reset();
		unlink((dir + "/kubelet.sock").c_str());
	}

	std::unique_ptr<api::DevicePlugin::Stub> plugin()
	{
		return api::DevicePlugin::NewStub(grpc::CreateChannel(
			"unix://" + dir + "/" + kEndpoint, grpc::InsecureChannelCredentials()));
	}
};

void deadline(grpc::ClientContext *ctx)
{
	ctx->set_deadline(std::chrono::system_clock::now() + kPatience);
}

void check_register(const api::RegisterRequest &r)
{
	if (r.version() != "v1beta1")
		fail("Register's version is '" + r.version() + "', not v1beta1");
	if (r.resource_name() != kResource)
		fail("Register's resource is '" + r.resource_name() + "'");
	if (r.endpoint() != kEndpoint)
		fail("Register's endpoint is '" + r.endpoint() + "'");
	if (!r.options().get_preferred_allocation_available() || r.options().pre_start_required())
		fail("Register's options do not offer GetPreferredAllocation alone");
}

// The GPU of a device ID: the ID without its -u<N>.
std::string gpu_of(const std::string &id)
{
	return id.substr(0, id.rfind("-u"));
}

struct Listing {
	std::vector<std::string> gpus;	// in the order the plugin lists them
	std::map<std::string, std::vector<std::string>> units;
	std::map<std::string, std::string> health;
};

Listing parse(const api::ListAndWatchResponse &r)
{
	Listing l;

	for (const auto &d : r.devices()) {
		std::string g = gpu_of(d.id());

		if (!l.units.count(g))
			l.gpus.push_back(g);
		l.units[g].push_back(d.id());
		l.health[d.id()] = d.health();
	}
	return l;
}

api::ListAndWatchResponse next(grpc::ClientReader<api::ListAndWatchResponse> *r, const char *why)
{
	api::ListAndWatchResponse resp;

	if (!r->Read(&resp))
		fail(std::string("ListAndWatch ended before ") + why);
	return resp;
}

std::vector<std::string> prefer(api::DevicePlugin::Stub *p, const std::vector<std::string> &avail,
				const std::vector<std::string> &must, int size)
{
	grpc::ClientContext ctx;
	api::PreferredAllocationRequest req;
	api::PreferredAllocationResponse resp;
	auto *c = req.add_container_requests();

	deadline(&ctx);
	for (const auto &id : avail)
		c->add_available_deviceids(id);
	for (const auto &id : must)
		c->add_must_include_deviceids(id);
	c->set_allocation_size(size);
	grpc::Status st = p->GetPreferredAllocation(&ctx, req, &resp);
	if (!st.ok())
		fail("GetPreferredAllocation failed: " + st.error_message());
	if (resp.container_responses_size() != 1)
		fail("GetPreferredAllocation answered " +
		     std::to_string(resp.container_responses_size()) + " containers for 1");
	const auto &ids = resp.container_responses(0).deviceids();
	return std::vector<std::string>(ids.begin(), ids.end());
}

grpc::Status allocate(api::DevicePlugin::Stub *p, const std::vector<std::string> &ids,
		      api::ContainerAllocateResponse *out)
{
	grpc::ClientContext ctx;
	api::AllocateRequest req;
	api::AllocateResponse resp;
	auto *c = req.add_container_requests();

	deadline(&ctx);
	for (const auto &id : ids)
		c->add_devices_ids(id);
	grpc::Status st = p->Allocate(&ctx, req, &resp);
	if (st.ok()) {
		if (resp.container_responses_size() != 1)
			fail("Allocate answered " + std::to_string(resp.container_responses_size()) +
			     " containers for 1");
		*out = resp.container_responses(0);
	}
	return st;
}

std::string join(const std::vector<std::string> &v)
{
	std::string s;

	for (const auto &x : v)
		s += (s.empty() ? "" : " ") + x;
	return s;
}

void expect_ids(const std::vector<std::string> &got, const std::vector<std::string> &want,
		const std::string &what)
{
	if (got != want)
		fail(what + ": preferred [" + join(got) + "], expected [" + join(want) + "]");
	ok(what + ": [" + join(got) + "]");
}

void write_answer(const api::ContainerAllocateResponse &a, const std::string &path)
{
	std::ofstream f(path);
	std::map<std::string, std::string> env(a.envs().begin(), a.envs().end());

	for (const auto &e : env)
		f << e.first << "=" << e.second << "\n";
	for (const auto &m : a.mounts())
		f << "mount " << m.host_path() << " " << m.container_path() << " "
		  << (m.read_only() ? "ro" : "rw") << "\n";
	if (!f)
		fail("cannot write " + path);
}

int scenario(const std::string &dir, const std::string &lost, unsigned int units)
{
	Kubelet k;
	k.dir = dir;
	k.start();

	// ---- registration, the socket, the options -----------------------
	check_register(k.reg->wait(1));
	ok("the plugin registered (v1beta1, xdm.io/gpu-memory, GetPreferredAllocation)");
	struct stat st;
	std::string sock = dir + "/" + kEndpoint;
	if (stat(sock.c_str(), &st) || !S_ISSOCK(st.st_mode) || (st.st_mode & 0777) != 0600)
		fail(sock + " is not a socket of mode 0600");
	ok("its socket is mode 0600");
	auto p = k.plugin();
	{
		grpc::ClientContext ctx;
		api::DevicePluginOptions o;

		deadline(&ctx);
		if (!p->GetDevicePluginOptions(&ctx, api::Empty(), &o).ok() ||
		    !o.get_preferred_allocation_available() || o.pre_start_required())
			fail("GetDevicePluginOptions does not offer GetPreferredAllocation alone");
		ok("GetDevicePluginOptions: GetPreferredAllocation, no PreStartContainer");
	}

	// ---- ListAndWatch: two GPUs, their units, all Healthy ------------
	Listing l;
	{
		grpc::ClientContext ctx;
		deadline(&ctx);
		auto r = p->ListAndWatch(&ctx, api::Empty());
		l = parse(next(r.get(), "its first list"));
		ctx.TryCancel();
	}
	if (l.gpus.size() != 2)
		fail("ListAndWatch lists " + std::to_string(l.gpus.size()) + " GPUs, not 2");
	for (const auto &g : l.gpus) {
		if (l.units[g].size() != units)
			fail("GPU " + g + " has " + std::to_string(l.units[g].size()) +
			     " units, not " + std::to_string(units));
		for (unsigned int u = 0; u < units; u++) {
			std::string id = g + "-u" + std::to_string(u);
			if (!l.health.count(id) || l.health[id] != "Healthy")
				fail("device " + id + " is not listed Healthy");
		}
	}
	const std::string g0 = l.gpus[0], g1 = l.gpus[1];
	ok("ListAndWatch: " + std::to_string(units) + " Healthy units on each of " + g0 + " and " +
	   g1);

	// ---- GetPreferredAllocation: one GPU, best fit -------------------
	// Available: all of GPU 0, three units of GPU 1.
	std::vector<std::string> avail = l.units[g0];
	for (unsigned int u = units - 3; u < units; u++)
		avail.push_back(g1 + "-u" + std::to_string(u));
	auto id = [](const std::string &g, unsigned int u) { return g + "-u" + std::to_string(u); };
	expect_ids(prefer(p.get(), avail, {}, 2),
		   { id(g1, units - 3), id(g1, units - 2) },
		   "2 units go to the GPU with the fewest free units that fit (GPU 1)");
	expect_ids(prefer(p.get(), avail, {}, 4), { id(g0, 0), id(g0, 1), id(g0, 2), id(g0, 3) },
		   "4 units go to GPU 0, the only one they fit");
	expect_ids(prefer(p.get(), avail, { id(g0, 5) }, 2), { id(g0, 5), id(g0, 0) },
		   "a unit that must be included keeps the slice on its GPU");
	if (!prefer(p.get(), avail, {}, (int)units + 1).empty())
		fail("GetPreferredAllocation of more units than any GPU has chose devices");
	ok("more units than any GPU has: no preference (the kubelet chooses)");

	// ---- Allocate ----------------------------------------------------
	api::ContainerAllocateResponse a;
	grpc::Status s = allocate(p.get(), { id(g0, 0), id(g0, 1) }, &a);
	if (!s.ok())
		fail("Allocate of two units of GPU 0 failed: " + s.error_message());
	std::map<std::string, std::string> env(a.envs().begin(), a.envs().end());
	if (env["CUDA_VISIBLE_DEVICES"] != g0 || env["NVIDIA_VISIBLE_DEVICES"] != g0)
		fail("Allocate's CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES are not " + g0);
	if (env["XDM_BUDGET_GROUP"].rfind("k8s-", 0) != 0)
		fail("Allocate's group '" + env["XDM_BUDGET_GROUP"] + "' does not start with k8s-");
	if (env.size() != 6 || env["LD_PRELOAD"].empty() || env["XDM_BUDGET_DIR"].empty() ||
	    env["XDM_BUDGET_GROUP_LIMIT"].empty())
		fail("Allocate's environment is not the six variables of the contract");
	// The shim of a build tree needs no mount of libxdm (its RUNPATH).
	if (a.mounts_size() != 2 || a.mounts(0).host_path() != env["XDM_BUDGET_DIR"] ||
	    a.mounts(0).container_path() != env["XDM_BUDGET_DIR"] || a.mounts(0).read_only() ||
	    a.mounts(1).container_path() != env["LD_PRELOAD"] || !a.mounts(1).read_only())
		fail("Allocate's mounts are not the budget directory (rw) and the shim (ro)");
	ok("Allocate: " + env["XDM_BUDGET_GROUP"] + " limit " + env["XDM_BUDGET_GROUP_LIMIT"] +
	   " on " + g0 + ", the budget directory rw and the shim ro");
	api::ContainerAllocateResponse again;
	if (!allocate(p.get(), { id(g0, 0), id(g0, 1) }, &again).ok() ||
	    again.envs().at("XDM_BUDGET_GROUP") == env["XDM_BUDGET_GROUP"])
		fail("two Allocates of the same devices got one group");
	ok("each allocation is a group of its own");
	s = allocate(p.get(), { id(g0, 0), id(g1, 0) }, &a);
	if (s.ok() || s.error_message().find("one GPU") == std::string::npos)
		fail("Allocate of units of two GPUs was not refused with a sentence: " +
		     s.error_message());
	ok("Allocate across two GPUs is refused: " + s.error_message());
	s = allocate(p.get(), { "GPU-nonesuch-u0" }, &a);
	if (s.ok())
		fail("Allocate of a device that does not exist succeeded");
	ok("Allocate of an unknown device is refused: " + s.error_message());

	// ---- the kubelet restarts ---------------------------------------
	// As a kubelet does when it starts: its socket anew, every plugin's
	// socket deleted; the plugin must serve again and register again.
	k.stop();
	unlink(sock.c_str());
	k.start();
	check_register(k.reg->wait(1));
	if (stat(sock.c_str(), &st) || !S_ISSOCK(st.st_mode))
		fail("the plugin registered again but serves no socket " + sock);
	ok("after a kubelet restart the plugin serves again and registered again");
	p = k.plugin();

	// ---- a GPU disappears -------------------------------------------
	{
		grpc::ClientContext ctx;
		deadline(&ctx);
		auto r = p->ListAndWatch(&ctx, api::Empty());
		Listing before = parse(next(r.get(), "its first list after the restart"));
		if (before.gpus.size() != 2 || before.health[id(g1, 0)] != "Healthy")
			fail("the list after the restart is not both GPUs Healthy");
		std::ofstream(lost) << "1\n";
		Listing after = parse(next(r.get(), "GPU 1's loss was sent"));
		for (unsigned int u = 0; u < units; u++) {
			if (after.health[id(g1, u)] != "Unhealthy")
				fail(id(g1, u) + " is not Unhealthy after GPU 1 was lost");
			if (after.health[id(g0, u)] != "Healthy")
				fail(id(g0, u) + " is not Healthy after GPU 1 was lost");
		}
		ctx.TryCancel();
	}
	ok("GPU 1 lost: the stream sent its units Unhealthy, GPU 0's Healthy");
	s = allocate(p.get(), { id(g1, 0) }, &a);
	if (s.ok() || s.error_message().find("Unhealthy") == std::string::npos)
		fail("Allocate on the lost GPU was not refused: " + s.error_message());
	ok("Allocate on the lost GPU is refused: " + s.error_message());
	k.stop();
	return 0;
}

int pods(const std::string &dir, const std::vector<std::pair<int, std::string>> &want)
{
	Kubelet k;
	k.dir = dir;
	k.start();
	check_register(k.reg->wait(1));
	auto p = k.plugin();
	std::vector<std::string> avail;
	{
		grpc::ClientContext ctx;
		deadline(&ctx);
		auto r = p->ListAndWatch(&ctx, api::Empty());
		Listing l = parse(next(r.get(), "its first list"));
		for (const auto &h : l.health)
			if (h.second == "Healthy")
				avail.push_back(h.first);
		ctx.TryCancel();
	}
	for (const auto &w : want) {
		auto ids = prefer(p.get(), avail, {}, w.first);
		if ((int)ids.size() != w.first)
			fail("no preferred allocation of " + std::to_string(w.first) + " units");
		api::ContainerAllocateResponse a;
		grpc::Status s = allocate(p.get(), ids, &a);
		if (!s.ok())
			fail("Allocate failed: " + s.error_message());
		write_answer(a, w.second);
		std::set<std::string> taken(ids.begin(), ids.end());
		std::vector<std::string> left;
		for (const auto &i : avail)
			if (!taken.count(i))
				left.push_back(i);
		avail = left;
		ok("a pod of " + std::to_string(w.first) + " units: [" + join(ids) + "]");
	}
	k.stop();
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	std::string mode = argc > 1 ? argv[1] : "";

	if (mode == "scenario" && argc == 5)
		return scenario(argv[2], argv[3], (unsigned int)std::strtoul(argv[4], nullptr, 10));
	if (mode == "pods" && argc >= 5 && argc % 2 == 1) {
		std::vector<std::pair<int, std::string>> want;
		for (int i = 3; i + 1 < argc; i += 2)
			want.emplace_back(std::atoi(argv[i]), argv[i + 1]);
		return pods(argv[2], want);
	}
	std::fprintf(stderr, "usage: fake_kubelet scenario DIR LOSTFILE UNITS\n"
			     "       fake_kubelet pods DIR N1 OUT1 [N2 OUT2 ...]\n");
	return 2;
}
