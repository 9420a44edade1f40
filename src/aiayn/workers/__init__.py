"""Work in other processes and threads: a translator or a language model in a spawned
process, a pool of them whose dying process is an error, a corpus translated shard by
shard, and the engines that feed decoding processes from one bounded queue."""
