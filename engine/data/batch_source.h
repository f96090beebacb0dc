// BatchSource: builds one replica's batch of a step on the host, byte for byte in the layout of
// the model's inputs (ModelReplica::inputs()), for the host feed (engine/data/device_feed.h) to
// copy in. Implementations (models/batch_sources.h) read a data set or recompute the synthetic
// values the models make on the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dpbench {

// A device buffer a step reads as data (images, labels, token ids, loss weights). Models fill
// their inputs with synthetic data once; a host feed (engine/data/device_feed.h) overwrites them
// before every step with a batch of exactly this layout. The buffer is the same every step, so a
// captured step replays over whatever was copied in.
struct InputBuffer {
  std::string name;
  void* data = nullptr;
  size_t bytes = 0;
};

// One input of a replica's batch: it must match the model replica's InputBuffer of that name.
struct InputSpec {
  std::string name;
  size_t bytes = 0;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // "cifar10 train: 50000 images from DIR", "synthetic images (host)".
  virtual std::string description() const = 0;
  // Per replica, in the model's input order.
  virtual std::vector<InputSpec> inputs() const = 0;
  // Global batches in one pass over the data; 0 for synthetic data (no epochs).
  virtual int64_t batches_per_epoch() const = 0;
  // Examples the epochs leave out (a partial global batch per epoch or bucket).
  virtual int64_t dropped_per_epoch() const { return 0; }
  // Writes replica `replica`'s share of global batch `step` (0-based over the whole run, epoch
  // after epoch) into `into` (one host pointer per input, inputs() order) and returns the items
  // the share counts (images, words, tokens). Called from several loader threads at once.
  virtual int64_t build(int64_t step, int replica, const std::vector<void*>& into) const = 0;
};

}  // namespace dpbench
