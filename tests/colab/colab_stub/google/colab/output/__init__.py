"""Stand-in for ``google.colab.output``: the custom widget manager switch."""

from google.colab.output._widgets import disable_custom_widget_manager, enable_custom_widget_manager  # noqa: F401
