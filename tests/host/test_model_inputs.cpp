// The models' registry entries own their inputs: each names its synthetic host batches and the
// data sets it reads, and those batches have exactly the layout of the model replica's inputs.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "engine/backends.h"
#include "engine/training/parameter_set.h"
#include "models/batch_sources.h"
#include "models/model_registry.h"
#include "sequence_test_support.h"

using namespace dpbench;

TEST_CASE("every model's entry names its synthetic batches and the data sets it reads", "[model_inputs]") {
  const std::map<std::string, std::vector<std::string>> expected = {
      {"trivial", {"cifar10"}},    {"resnet50", {"cifar10"}},    {"resnet101", {"cifar10"}},
      {"resnet152", {"cifar10"}},  {"inception3", {}},           {"vgg16", {}},
      {"cifar10_cnn", {"cifar10"}}, {"nmt", {"parallel_text"}}, {"rnnlm", {"ptb"}},
      {"gpt", {"tokens"}}};
  for (const ModelEntry& entry : model_registry()) {
    INFO(entry.name);
    if (!entry.implemented) continue;
    CHECK(entry.inputs.synthetic);
    std::vector<std::string> data_sets;
    for (const DataSetReader& reader : entry.inputs.data_sets) {
      CHECK(reader.create);
      data_sets.push_back(reader.data_name);
    }
    CHECK(data_sets == expected.at(entry.name));
  }
}

TEST_CASE("a data set that cannot feed a model names the models it feeds", "[model_inputs]") {
  CHECK(why_data_set_cannot_feed("rnnlm", "ptb").empty());
  CHECK(why_data_set_cannot_feed("nmt", "ptb") == "cannot feed --model=nmt; it feeds rnnlm");
  CHECK(why_data_set_cannot_feed("vgg16", "cifar10") ==
        "cannot feed --model=vgg16; it feeds trivial, resnet50, resnet101, resnet152, cifar10_cnn");
}

TEST_CASE("host synthetic batches have the layout of the replica's inputs", "[model_inputs]") {
  RunConfig trivial;
  trivial.model = "trivial";
  trivial.batch_size = 2;
  RunConfig cifar10_cnn = trivial;
  cifar10_cnn.model = "cifar10_cnn";
  cifar10_cnn.data_format = "NHWC";
  cifar10_cnn.precision = Precision::bf16;
  const std::vector<RunConfig> configs = {
      trivial, cifar10_cnn, testing::tiny_nmt("dynamic", "bi"), testing::tiny_nmt("cudnn_lstm", "uni"),
      testing::sequence_config("rnnlm", 2, {{"vocab_size", "17"}, {"embedding_dim", "4"}, {"num_units", "4"},
                                            {"seq_len", "3"}}),
      testing::sequence_config("gpt", 2, {{"vocab_size", "17"}, {"seq_len", "3"}, {"num_layers", "1"},
                                          {"num_heads", "2"}, {"hidden_size", "8"}})};
  for (RunConfig config : configs) {
    INFO(config.model << " " << config.sequence.encoder_type);
    config.gpu_indices = {0};
    const std::unique_ptr<Model> model = find_model(config.model)->create(config);
    std::vector<std::unique_ptr<Device>> devices = create_devices(BackendKind::reference, {0});
    ParameterSet parameters(*devices[0], model->layout(), config.activation_type());
    const std::unique_ptr<ModelReplica> replica =
        model->create_replica(*devices[0], parameters, ReplicaShard{0, 1, config.batch_size, config.seed});
    const std::vector<InputBuffer> buffers = replica->inputs();
    const std::vector<InputSpec> specs = create_batch_source(config, *model)->inputs();
    REQUIRE(specs.size() == buffers.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      CHECK(specs[i].name == buffers[i].name);
      CHECK(specs[i].bytes == buffers[i].bytes);
    }
  }
}
