"""The Activation Oracle paper's classification data: its catalogue, files and hub sets, their readers, the splits, an oracle run's rows from them and the suite scored beside an evaluation."""
