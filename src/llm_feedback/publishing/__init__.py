"""Publishing results: the Hugging Face Hub upload and its dataset card."""
