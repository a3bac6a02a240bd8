# tools/device-plugin: xdm-device-plugin, the Kubernetes device plugin
# (man/xdm-device-plugin.8) that serves each GPU's memory as the resource
# xdm.io/gpu-memory and puts each container under a group of xdm's budget.
# Its logic is C (libdp, always built: tests/k8s/xdm_k8s_allocate links it
# on machines without gRPC); only its gRPC layer (server.cc) is C++, over
# the code protoc and grpc_cpp_plugin generate from api.proto at build
# time, when configure finds gRPC (--with-device-plugin).
noinst_LTLIBRARIES += tools/device-plugin/libdp.la
tools_device_plugin_libdp_la_SOURCES = \
	tools/device-plugin/dp.h \
	tools/device-plugin/config.c \
	tools/device-plugin/log.c \
	tools/device-plugin/nvml.c \
	tools/device-plugin/gpus.c \
	tools/device-plugin/prefer.c \
	tools/device-plugin/allocate.c
tools_device_plugin_libdp_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DXDM_DP_DEFAULT_SHIM='"$(libdir)/libxdm-preload.so"'
tools_device_plugin_libdp_la_LIBADD = libxdm.la -ldl

# The man page is in every tarball, and installed with the program only.
EXTRA_DIST += tools/device-plugin/api.proto tools/device-plugin/server.h \
	tools/device-plugin/server.cc tools/device-plugin/main.c man/xdm-device-plugin.8

# The generated code: one protoc run makes all four files.
dp_api_generated = tools/device-plugin/api.pb.cc tools/device-plugin/api.pb.h \
	tools/device-plugin/api.grpc.pb.cc tools/device-plugin/api.grpc.pb.h
CLEANFILES += $(dp_api_generated) tools/device-plugin/api.stamp
# C++ of our own: the warnings of the C code where C++ has them.
dp_cxxflags = $(GRPC_CFLAGS) $(PTHREAD_FLAGS) -std=c++17 -Wall -Wextra -Wshadow $(DP_WERROR)
dp_cppflags = $(AM_CPPFLAGS) -I$(top_builddir)/tools/device-plugin

if HAVE_DEVICE_PLUGIN
$(dp_api_generated): tools/device-plugin/api.stamp
tools/device-plugin/api.stamp: $(top_srcdir)/tools/device-plugin/api.proto
	$(AM_V_GEN)$(MKDIR_P) tools/device-plugin && \
	$(PROTOC) -I$(top_srcdir)/tools/device-plugin --cpp_out=tools/device-plugin \
	  --grpc_out=tools/device-plugin --plugin=protoc-gen-grpc=$(GRPC_CPP_PLUGIN) \
	  $(top_srcdir)/tools/device-plugin/api.proto && touch $@

# The generated messages and stubs, shared by the plugin and the fake
# kubelet of tests/k8s; compiled without -Werror (not our code).
noinst_LTLIBRARIES += tools/device-plugin/libdpapi.la
nodist_tools_device_plugin_libdpapi_la_SOURCES = $(dp_api_generated)
tools_device_plugin_libdpapi_la_CPPFLAGS = $(dp_cppflags)
tools_device_plugin_libdpapi_la_CXXFLAGS = $(GRPC_CFLAGS) $(PTHREAD_FLAGS) -std=c++17
tools_device_plugin_libdpapi_la_LIBADD = $(GRPC_LIBS)

bin_PROGRAMS += tools/device-plugin/xdm-device-plugin
man8_MANS = man/xdm-device-plugin.8
tools_device_plugin_xdm_device_plugin_SOURCES = \
	tools/device-plugin/server.h \
	tools/device-plugin/server.cc \
	tools/device-plugin/main.c
tools_device_plugin_xdm_device_plugin_CPPFLAGS = $(dp_cppflags)
tools_device_plugin_xdm_device_plugin_CXXFLAGS = $(dp_cxxflags)
tools_device_plugin_xdm_device_plugin_LDADD = tools/device-plugin/libdp.la \
	tools/device-plugin/libdpapi.la $(GRPC_LIBS)
# The headers must exist before server.cc is compiled.
tools/device-plugin/xdm_device_plugin-server.$(OBJEXT): \
	tools/device-plugin/api.stamp
endif
