"""Images in: decoding files, labelled image folders and the model's input tensor."""
